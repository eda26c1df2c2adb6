import type { AgentState } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { countedUsage } from "../usage/counted.ts";
import { recordEnded, recordRunsEnded, recordSpawned } from "./history.ts";

/**
 * Every run of an agent goes into the team's agent history at three points: spawn (or resume), the end of a run that
 * a call made (kill, completion, timeout), and agents the liveness machinery declared inactive. Recording never undoes
 * or blocks what it records: a failure comes back as a warning (or is logged when no tool call waits for it).
 */

/** How a run ended, as the history records it. */
export type EndedStatus = "interrupted" | "completed" | "failed" | "timeout" | "budget";

export interface EndDetails {
  reason: string;
  /** The agent's own account of its work (complete-agent). */
  summary?: string;
}

async function asWarnings(
  ctx: TeamsContext,
  what: string,
  write: () => Promise<string[]>,
): Promise<string[]> {
  try {
    return await write();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    ctx.log("warn", `could not record ${what}`, { error: message });
    return [`Could not record ${what}: ${message}`];
  }
}

export function agentSpawned(ctx: TeamsContext, agent: AgentState): Promise<string[]> {
  return asWarnings(ctx, "the spawn in the agent history", () => recordSpawned(ctx, agent));
}

/**
 * A running agent's run ended. From kill-agent: "interrupted" when forced, "completed" when it confirmed a graceful
 * shutdown; finishAgent passes whatever its caller (e.g. complete-agent) says.
 */
export function agentEnded(
  ctx: TeamsContext,
  agent: AgentState,
  status: EndedStatus,
  details: EndDetails,
): Promise<string[]> {
  return asWarnings(ctx, "the end of the run in the agent history", async () => {
    const usage = await countedUsage(ctx, agent);
    return recordEnded(ctx, agent.teamName, agent.agentId, status, {
      ...details,
      ...(usage ? { usage: usage.totals } : {}),
    });
  });
}

/** Agents declared inactive in one batch were interrupted: one history write for the batch. */
export async function agentsInterrupted(
  ctx: TeamsContext,
  teamName: string,
  agents: readonly { agent: AgentState; reason: string }[],
): Promise<void> {
  const warnings = await asWarnings(ctx, "the interrupted runs in the agent history", async () => {
    const ends = await Promise.all(
      agents.map(async ({ agent, reason }) => {
        const usage = await countedUsage(ctx, agent);
        return {
          agentId: agent.agentId,
          status: "interrupted" as const,
          reason,
          ...(usage ? { usage: usage.totals } : {}),
        };
      }),
    );
    return recordRunsEnded(ctx, teamName, ends);
  });
  for (const warning of warnings) ctx.log("warn", warning, { team: teamName });
}

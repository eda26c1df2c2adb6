import type { AgentState } from "../state/schemas.ts";
import type { TeamsContext } from "./context.ts";
import { recordEnded, recordRunsEnded, recordSpawned } from "./history.ts";
import { onAgentsInactive } from "./inactive.ts";

/**
 * The lifecycle points spawn and kill report, in one place, so what happens at them (today: the agent history) is
 * changed here and not inside the spawn and kill flows. A listener's failure never undoes a spawn or a kill: it comes
 * back as a warning.
 */

/** How a run ended, as the history records it. */
export type EndedStatus = "interrupted" | "completed" | "failed" | "timeout";

export interface EndDetails {
  reason: string;
  /** The agent's own account of its work (complete-agent). */
  summary?: string;
}

export interface LifecycleListener {
  spawned?(ctx: TeamsContext, agent: AgentState): Promise<string[] | undefined>;
  /**
   * A running agent's run ended. From kill-agent: "interrupted" when forced, "completed" when it confirmed a graceful
   * shutdown. finishAgent passes whatever its caller (e.g. complete-agent) says.
   */
  ended?(
    ctx: TeamsContext,
    agent: AgentState,
    status: EndedStatus,
    details: EndDetails,
  ): Promise<string[] | undefined>;
}

export const historyListener: LifecycleListener = {
  spawned: (ctx, agent) => recordSpawned(ctx, agent),
  ended: (ctx, agent, status, details) => recordEnded(ctx, agent.teamName, agent.agentId, status, details),
};

// Agents the liveness machinery gives up on (stale, pane or session gone) were interrupted: one history write per
// batch, so a sweep that ends many agents at once stays cheap.
onAgentsInactive(async (ctx, teamName, agents) => {
  const warnings = await recordRunsEnded(
    ctx,
    teamName,
    agents.map(({ agent, reason }) => ({ agentId: agent.agentId, status: "interrupted", reason })),
  );
  for (const warning of warnings) ctx.log("warn", warning, { team: teamName });
});

/** Listeners run in order on every spawn and kill; push to add one. */
export const lifecycleListeners: LifecycleListener[] = [historyListener];

async function notify(
  ctx: TeamsContext,
  what: string,
  run: (listener: LifecycleListener) => Promise<string[] | undefined> | undefined,
): Promise<string[]> {
  const warnings: string[] = [];
  for (const listener of lifecycleListeners) {
    try {
      warnings.push(...((await run(listener)) ?? []));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      ctx.log("warn", `${what} listener failed`, { error: message });
      warnings.push(`Could not record ${what}: ${message}`);
    }
  }
  return warnings;
}

export function agentSpawned(ctx: TeamsContext, agent: AgentState): Promise<string[]> {
  return notify(ctx, "the spawn in the agent history", (l) => l.spawned?.(ctx, agent));
}

export function agentEnded(
  ctx: TeamsContext,
  agent: AgentState,
  status: EndedStatus,
  details: EndDetails,
): Promise<string[]> {
  return notify(ctx, "the end of the run in the agent history", (l) =>
    l.ended?.(ctx, agent, status, details),
  );
}

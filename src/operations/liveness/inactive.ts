import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { agentsInterrupted } from "../history/run-history.ts";
import { notifyLeader } from "../messages/notify.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { reassignTasksOf } from "../team/task.ts";

/** Why the liveness machinery gave up on an agent. */
export type InactiveCause =
  /** No heartbeat for `graceMisses` sweeps. */
  | "stale"
  /** The server kept saying "busy" but nothing happened for longer than `busyCapMs`. */
  | "busy_cap"
  /** The sweep found its session missing on the server. */
  | "session_gone"
  /** The sweep found its tmux pane gone. */
  | "pane_gone"
  /** The server announced the session's deletion (`session.deleted`). */
  | "session_deleted";

export interface InactiveAgent {
  /** The agent's state as written, status `inactive`. */
  agent: AgentState;
  cause: InactiveCause;
  reason: string;
  /** Ids of the tasks handed back to pending. */
  tasks: string[];
}

/** The state an agent is left in once declared inactive. */
export function markedInactive(agent: AgentState, reason: string, nowIso: string): AgentState {
  // A dead agent's requests died with its turn: nothing is left to answer.
  return { ...agent, status: "inactive", statusReason: reason, waitingFor: null, updatedAt: nowIso };
}

export function inactiveNotice(agents: readonly InactiveAgent[]): string {
  return agents
    .map(
      ({ agent, reason, tasks }) =>
        `Agent ${agent.name} (${agent.agentId}) became inactive: ${reason}. Tasks returned to pending: ${
          tasks.length > 0 ? tasks.join(", ") : "none"
        }.`,
    )
    .join("\n");
}

/**
 * What follows agents of one team going inactive, run by the one process that made the transition (it happens under
 * the agent's lock): one task-board write for all of them, one notice to the leader (one line per agent), one history
 * write recording their runs as interrupted.
 */
export async function handOverInactive(
  ctx: TeamsContext,
  team: TeamConfig,
  deaths: readonly Omit<InactiveAgent, "tasks">[],
): Promise<InactiveAgent[]> {
  if (deaths.length === 0) return [];
  const byAgent = await reassignTasksOf(
    ctx,
    team.name,
    deaths.map((death) => death.agent.agentId),
    "its owner became inactive",
  );
  const agents = deaths.map((death) => ({ ...death, tasks: byAgent.get(death.agent.agentId) ?? [] }));
  try {
    await notifyLeader(ctx, team, {
      type: "agent_inactive",
      text: inactiveNotice(agents),
      data: {
        agents: agents.map(({ agent, cause, reason, tasks }) => ({
          agentId: agent.agentId,
          name: agent.name,
          cause,
          reason,
          tasks,
        })),
      },
    });
  } catch (error) {
    ctx.log("error", "could not write the inactive notice to the leader's inbox", {
      team: team.name,
      error: error instanceof Error ? error.message : String(error),
    });
  }
  // ServerInfo.activeSessions counts running agent sessions; these just stopped counting.
  await recountActiveSessions(ctx).catch((error: unknown) => {
    ctx.log("warn", "could not update the server's activeSessions", {
      error: error instanceof Error ? error.message : String(error),
    });
  });
  await agentsInterrupted(ctx, team.name, agents);
  ctx.log("info", `${agents.length} agent(s) of team ${team.name} became inactive`, {
    agents: agents.map(({ agent, reason }) => `${agent.name}: ${reason}`),
  });
  return agents;
}

import { isoNow } from "../../clock.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { agentEnded, type EndedStatus } from "../history/run-history.ts";
import { isRunning } from "../liveness/heartbeat.ts";
import { CallerError, errorText } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { reassignTasksOf } from "../team/task.ts";
import { settleWorktree } from "../worktrees/worktrees.ts";
import { closeAgentPane } from "./agent-pane.ts";
import { agentNotFound } from "./agent-words.ts";
import { releaseColor } from "./color-pool.ts";
import { abortEndedSession } from "./session-abort.ts";

/** An agent of `team` by id, or a CallerError saying it is missing or damaged. */
export async function readAgentOrFail(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
): Promise<AgentState> {
  const read = await ctx.store.readAgent(team.name, agentId);
  if (read.kind === "ok") return read.value;
  if (read.kind === "corrupt") throw new CallerError(`Agent '${agentId}' cannot be read: ${read.warning}`);
  throw new CallerError(agentNotFound(agentId, team.name));
}

export interface FinishResult {
  /** This call made the transition from a running status (a concurrent finisher, or an agent already inactive: false). */
  ended: boolean;
  reassignedTasks: string[];
  /** Why the agent's worktree was kept (work in it that removing would lose), also among `warnings`. */
  worktreeKept: string[];
  warnings: string[];
}

export interface FinishHow {
  /** Kept as the agent's statusReason and given to the history. */
  reason: string;
  /** AgentState.outcome to record (an agent that already ended, e.g. inactive, keeps the one it has). */
  outcome: NonNullable<AgentState["outcome"]>;
  /** History status for a run that was still going. */
  history: EndedStatus;
  /** The agent's own account of its work, for the history (complete-agent). */
  summary?: string;
  /** Leave the pane open for a human to read (a team with keepPanes, on completion). */
  keepPane?: boolean;
  /**
   * Abort the session's running turn (default). Not when the agent itself is calling: aborting would cut off the
   * very tool call that reports its end, and the turn ends by itself once the agent has the result.
   */
  abortSession?: boolean;
  /** resume-agent ending the record it claimed for this successor: the old turn is aborted all the same. */
  resumingAs?: string;
}

/** What the status write found and did: how the end was decided, and whether this call ended a running agent. */
interface Termination {
  how: FinishHow;
  /** The latest record: a resume or spawn may have recorded a pane after the caller read the agent. */
  current: AgentState;
  /** The record this call wrote, when it was the one that terminated the agent. */
  endedBy?: AgentState;
  wasRunning: boolean;
}

/**
 * End an agent for good: abort its session, close its pane and make sure its attach process is gone, hand its
 * in_progress tasks back, release its color, mark it terminated, recount the server's active sessions and record
 * the end. Every step is idempotent, so two finishers racing do no harm; the status write decides who records it.
 * Shared by kill-agent and whatever else ends an agent (completion, an expired kill, a time limit).
 */
export async function finishAgent(
  ctx: TeamsContext,
  agent: AgentState,
  decide: FinishHow | ((current: AgentState) => FinishHow),
): Promise<FinishResult> {
  // The status first, decided under the lock: from here on the sweep and the monitor leave the agent alone, so closing
  // its pane below cannot make it look dead and record a false "interrupted" over this outcome. The write also decides
  // which of two racing finishers ended the run, and so which one may abort the session.
  const { how, current, endedBy, wasRunning } = await terminate(ctx, agent, decide);
  const warnings: string[] = [];
  if (how.abortSession !== false && endedBy) {
    const abort = { wasRunning, ...(how.resumingAs ? { resumingAs: how.resumingAs } : {}) };
    warnings.push(...(await abortEndedSession(ctx, endedBy, abort)));
  }
  if (!how.keepPane) {
    // C-c in the attach TUI cancels the session's turn: right for a kill, wrong for an agent reporting its own end.
    warnings.push(...(await closeAgentPane(ctx, current, { interrupt: how.abortSession !== false })));
  }

  // Only the call that ended the run decides, once its pane no longer runs anything in the worktree.
  const worktreeKept = endedBy ? await settleWorktree(ctx, endedBy) : [];
  warnings.push(...worktreeKept);

  const reassigned = await reassignTasksOf(
    ctx,
    agent.teamName,
    [agent.agentId],
    `agent ${agent.name} ended: ${how.reason}`,
  );
  warnings.push(...(await releaseColor(ctx, agent.agentId)));
  await recountActiveSessions(ctx).catch((error: unknown) => {
    warnings.push(`Could not update activeSessions: ${errorText(error)}`);
  });
  if (endedBy && wasRunning) {
    const details = { reason: how.reason, ...(how.summary ? { summary: how.summary } : {}) };
    warnings.push(...(await agentEnded(ctx, endedBy, how.history, details)));
  }
  return {
    ended: endedBy !== undefined && wasRunning,
    reassignedTasks: reassigned.get(agent.agentId) ?? [],
    worktreeKept,
    warnings,
  };
}

/** The status write of finishAgent, under the agent's lock; an agent already terminated is left as it is. */
async function terminate(
  ctx: TeamsContext,
  agent: AgentState,
  decide: FinishHow | ((current: AgentState) => FinishHow),
): Promise<Termination> {
  // A function decides from the record as it is under the lock, not as the caller read it (finishOverdueKill).
  const howFor = typeof decide === "function" ? decide : () => decide;
  const now = isoNow(ctx.clock);
  const result: Termination = { how: howFor(agent), current: agent, wasRunning: false };
  await ctx.store.updateAgent(agent.teamName, agent.agentId, (state) => {
    if (!state) return undefined;
    result.current = state;
    if (state.status === "terminated") return undefined;
    const how = howFor(state);
    const wasRunning = isRunning(state.status);
    result.how = how;
    result.wasRunning = wasRunning;
    result.endedBy = {
      ...state,
      status: "terminated",
      terminatedAt: now,
      updatedAt: now,
      statusReason: how.reason,
      outcome: wasRunning ? how.outcome : (state.outcome ?? how.outcome),
      // Its requests ended with its turn: nothing is left to answer.
      waitingFor: null,
    };
    return result.endedBy;
  });
  return result;
}

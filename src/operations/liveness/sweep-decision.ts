import type { BatchChange } from "../../state/agent-files.ts";
import { type AgentView, effectiveHeartbeatTs } from "../../state/agent-view.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { agentPaneRef } from "../agents/agent-pane.ts";
import type { TeamsContext } from "../context.ts";
import { isLive, nextHeartbeat } from "./heartbeat.ts";
import { type InactiveAgent, type InactiveCause, markedInactive } from "./inactive.ts";
import { type ServerFacts, statusKnown } from "./server-facts.ts";

// What the stale sweep makes of one agent: the verdict from the facts, then the decision under the agent's lock
// (specs/heartbeat.md).

export type SweepOutcome =
  | { kind: "none" | "miss" | "refreshed" | "reset" | "waiting" }
  | { kind: "remind"; agent: AgentState }
  | { kind: "inactive"; death: Omit<InactiveAgent, "tasks"> };

export type Verdict =
  | { kind: "dead"; cause: InactiveCause; reason: string }
  | { kind: "busy" }
  /** Blocked on a permission or a question: no miss, no busy cap (see specs/heartbeat.md). */
  | { kind: "waiting" }
  | { kind: "miss"; cause: "stale" | "busy_cap"; busyForS?: number };

function seconds(ms: number): number {
  return Math.round(ms / 1000);
}

/** The leader is the user's own session: never swept, whatever its files say. */
export function isSweptMember(team: TeamConfig, agent: AgentState): boolean {
  return (
    agent.role !== "leader" &&
    agent.agentId !== team.leader &&
    agent.sessionId !== team.leaderSessionId &&
    isLive(agent.status)
  );
}

/** Last time the agent itself (not the sweep vouching for a busy session) showed life. */
function lastSignOfLife(view: Pick<AgentView, "state" | "heartbeat">): number {
  return Math.max(
    Date.parse(view.state.heartbeatTs),
    view.state.lastEventAt ? Date.parse(view.state.lastEventAt) : 0,
    view.heartbeat?.lastEventAt ? Date.parse(view.heartbeat.lastEventAt) : 0,
  );
}

/** Check the facts before calling a stale agent missing: its session, its pane, whether the server says it works. */
export async function judgeStale(
  ctx: TeamsContext,
  view: AgentView,
  facts: ServerFacts,
  now: number,
): Promise<Verdict> {
  const { state } = view;
  const known = statusKnown(facts, state);
  const activity = known ? facts.statuses[state.sessionId] : undefined;
  if (known && facts.server && activity === undefined) {
    // Idle sessions are left out of the status map, so only an explicit lookup tells idle from deleted.
    const exists = await facts.server.sessionExists(state.sessionId).catch(() => undefined);
    if (exists === false) {
      return {
        kind: "dead",
        cause: "session_gone",
        reason: `its OpenCode session ${state.sessionId} no longer exists`,
      };
    }
  }
  const paneRef = agentPaneRef(state);
  if (paneRef) {
    const pane = await ctx.edges.tmux.paneState(paneRef).catch(() => "unknown" as const);
    if (pane === "gone")
      return { kind: "dead", cause: "pane_gone", reason: `its tmux pane ${state.paneId} is gone` };
  }
  if (state.waitingFor) return { kind: "waiting" };
  if (activity === "busy" || activity === "retry") {
    const quietMs = now - lastSignOfLife(view);
    if (quietMs <= ctx.options.busyCapMs) return { kind: "busy" };
    return { kind: "miss", cause: "busy_cap", busyForS: seconds(quietMs) };
  }
  return { kind: "miss", cause: "stale" };
}

/** A waiting agent is neither counted missing nor capped; the leader is reminded once when it waits too long. */
function decideWaiting(
  ctx: TeamsContext,
  agent: AgentState,
  withMissesReset: AgentState,
  now: number,
): BatchChange<SweepOutcome> {
  const waiting = agent.waitingFor;
  // Answered between the verdict and the lock: the next sweep judges it afresh.
  if (!waiting) return { result: { kind: "none" } };
  const base = agent.consecutiveMisses > 0 ? withMissesReset : agent;
  if (waiting.remindedAt || now - Date.parse(waiting.since) < ctx.options.waitingRemindMs) {
    return { ...(base !== agent ? { next: base } : {}), result: { kind: "waiting" } };
  }
  const nowIso = new Date(now).toISOString();
  const next: AgentState = { ...base, waitingFor: { ...waiting, remindedAt: nowIso }, updatedAt: nowIso };
  return { next, result: { kind: "remind", agent: next } };
}

/** What `decide` works from: the agent as read under its lock, the verdict of the facts (none: only reset misses). */
export interface DecisionInput {
  team: TeamConfig;
  agentId: string;
  agent: AgentState | undefined;
  verdict: Verdict | undefined;
  now: number;
  facts: ServerFacts;
}

/**
 * Re-check with the agent's lock held (a heartbeat or another sweeper may have come first) and say what to write.
 * The agent's new state goes into the batch; the heartbeat slot of a busy agent is written here, in place.
 */
export async function decide(ctx: TeamsContext, input: DecisionInput): Promise<BatchChange<SweepOutcome>> {
  const { team, agentId, agent, verdict, now } = input;
  const { store } = ctx;
  if (!agent || !isSweptMember(team, agent)) return { result: { kind: "none" } };
  const slot = await store.readHeartbeat(team.name, agentId);
  const nowIso = new Date(now).toISOString();
  const heartbeatTs = effectiveHeartbeatTs(agent, slot.record);
  const fresh = now - Date.parse(heartbeatTs) <= ctx.options.staleThresholdMs;
  const withMissesReset: AgentState = {
    ...agent,
    consecutiveMisses: 0,
    lastMissAt: undefined,
    updatedAt: nowIso,
  };

  // Dead is a fact (pane or session gone), not a matter of heartbeat age: a session still running on the server
  // can keep heartbeating after the user closed its pane.
  if (verdict?.kind === "dead") {
    const next = markedInactive(agent, verdict.reason, nowIso);
    return {
      next,
      result: { kind: "inactive", death: { agent: next, cause: verdict.cause, reason: verdict.reason } },
    };
  }
  if (verdict?.kind === "waiting") return decideWaiting(ctx, agent, withMissesReset, now);
  if (fresh || verdict === undefined) {
    if (!fresh || agent.consecutiveMisses === 0) return { result: { kind: "none" } };
    return { next: withMissesReset, result: { kind: "reset" } };
  }
  if (verdict.kind === "busy") {
    store.writeHeartbeat(
      team.name,
      agentId,
      nextHeartbeat(slot.record, nowIso, "sweep_busy_check", { event: false }),
    );
    return {
      ...(agent.consecutiveMisses > 0 ? { next: withMissesReset } : {}),
      result: { kind: "refreshed" },
    };
  }
  return decideMiss(ctx, { ...input, agent, verdict }, heartbeatTs);
}

/** A stale agent the facts did not vouch for: one more miss, or inactive once the misses reach `graceMisses`. */
function decideMiss(
  ctx: TeamsContext,
  {
    agent,
    verdict,
    now,
    facts,
  }: DecisionInput & { agent: AgentState; verdict: Extract<Verdict, { kind: "miss" }> },
  heartbeatTs: string,
): BatchChange<SweepOutcome> {
  const nowIso = new Date(now).toISOString();
  // Another sweeper counted this interval's miss already. The 10% slack absorbs timer jitter.
  if (agent.lastMissAt && now - Date.parse(agent.lastMissAt) < ctx.options.sweepIntervalMs * 0.9)
    return { result: { kind: "none" } };
  // Misses are consecutive only when no heartbeat came in since the last one was counted.
  const consecutive =
    agent.lastMissAt && Date.parse(heartbeatTs) <= Date.parse(agent.lastMissAt)
      ? agent.consecutiveMisses + 1
      : 1;
  if (consecutive < ctx.options.graceMisses) {
    return {
      next: { ...agent, consecutiveMisses: consecutive, lastMissAt: nowIso, updatedAt: nowIso },
      result: { kind: "miss" },
    };
  }
  const quiet = seconds(now - Date.parse(heartbeatTs));
  let reason =
    verdict.cause === "busy_cap"
      ? `its session has reported busy with no activity for ${verdict.busyForS ?? quiet} s (cap ${seconds(ctx.options.busyCapMs)} s)`
      : `no heartbeat for ${quiet} s (${consecutive} missed sweeps)`;
  if (verdict.cause === "stale" && !statusKnown(facts, agent)) {
    reason += facts.server
      ? `; the project's OpenCode server did not answer for its directory ${agent.cwd}`
      : "; the project's OpenCode server is not running";
  }
  const next = markedInactive(
    { ...agent, consecutiveMisses: consecutive, lastMissAt: nowIso },
    reason,
    nowIso,
  );
  return { next, result: { kind: "inactive", death: { agent: next, cause: verdict.cause, reason } } };
}

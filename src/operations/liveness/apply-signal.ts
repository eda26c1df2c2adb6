// What one signal does to one agent's record, under the agent's lock: its status, heartbeat, misses, waiting request
// and last error, written when changed, and what the monitor must do after the lock is given back (monitor.ts).
import type {
  AgentState,
  AgentStatus,
  HeartbeatRecord,
  HeartbeatSource,
  ModelFailure,
} from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { nextHeartbeat } from "./heartbeat.ts";
import { type InactiveAgent, markedInactive } from "./inactive.ts";
import { clearedBySuccess, recordError } from "./model-failure.ts";
import type { Signal } from "./signals.ts";
import type { WaitingRequest } from "./waiting.ts";

/** What the server last said each agent session is doing; activity alone does not make an idle session busy. */
export type ServerActivity = ReadonlyMap<string, "busy" | "idle">;

export interface ApplyOutcome {
  death?: Omit<InactiveAgent, "tasks">;
  /** A request seen for the first time: the leader is to hear of it. */
  asked?: { agent: AgentState; request: WaitingRequest };
  /** The agent had ended and resume-agent continues it as this agent: the event is its successor's. */
  successor?: string;
  /** A kind of model failure seen for the first time: the leader is to hear of it. */
  failed?: { agent: AgentState; failure: ModelFailure };
}

/** The agent as an applied signal left it (tracked whether or not it was written), and what follows from it. */
export interface Applied {
  next: AgentState;
  outcome?: ApplyOutcome;
}

/** The status `signal` moves an agent to, if any. A kill in progress owns the status of a shutting_down agent. */
export function desiredStatus(
  signal: Signal,
  current: AgentStatus,
  serverActivity: ServerActivity,
): AgentStatus | undefined {
  if (current === "shutting_down") return undefined;
  switch (signal.kind) {
    case "busy":
      return "active";
    case "idle":
      // A subagent done while the agent's own turn runs leaves the agent at work.
      if (signal.child) return serverActivity.get(signal.sessionId) === "idle" ? "idle" : undefined;
      return signal.resync && current !== "active" ? undefined : "idle";
    case "waiting":
      // A request is asked from inside a turn: the agent is at work, only paused.
      return "active";
    case "activity":
      if (signal.running) return "active";
      // Late updates after a turn ended (summaries, titles) must not flip an idle agent back to active.
      return serverActivity.get(signal.sessionId) === "idle" ? undefined : "active";
    default:
      return undefined;
  }
}

/** What a waiting/answered/idle signal makes of `waitingFor`; undefined when it stays as it is. */
function nextWaiting(
  agent: AgentState,
  signal: Signal,
  nowIso: string,
): AgentState["waitingFor"] | undefined {
  const current = agent.waitingFor ?? null;
  switch (signal.kind) {
    case "waiting":
      // The leader's own session is the user's: the user sees its requests.
      if (agent.role === "leader" || current?.requestId === signal.request.requestId) return undefined;
      return { ...signal.request, since: nowIso };
    case "answered":
      return current?.requestId === signal.requestId ? null : undefined;
    case "idle":
      // An idle session waits on nothing, whatever reply event the stream lost; a subagent's, only on its own request.
      if (signal.child) return current?.sessionId === signal.child ? null : undefined;
      return current ? null : undefined;
    default:
      return undefined;
  }
}

/** A deleted session is a death, except the leader's (the user's own session) and one a kill in progress deleted. */
export async function applyDeleted(ctx: TeamsContext, agent: AgentState, now: number): Promise<Applied> {
  if (agent.role === "leader" || agent.status === "shutting_down") return { next: agent };
  const reason = `its OpenCode session ${agent.sessionId} was deleted`;
  const next = markedInactive(agent, reason, new Date(now).toISOString());
  // Blocking like every write under the agent's lock here; the caller flushes it once the lock is given back.
  await ctx.store.writeAgent(next, { durable: false, blocking: true });
  return { next, outcome: { death: { agent: next, cause: "session_deleted", reason } } };
}

/** Heartbeat, status, misses, waiting request and last error as the signal says; the agent file only if changed. */
export async function applySignal(
  ctx: TeamsContext,
  {
    teamName,
    agentId,
    agent,
    slot,
  }: { teamName: string; agentId: string; agent: AgentState; slot?: HeartbeatRecord },
  signal: Exclude<Signal, { kind: "deleted" }>,
  now: number,
  serverActivity: ServerActivity,
  /** The heartbeat as written: the usage counter puts its latest count on it (specs/usage-and-budgets.md). */
  withUsage: (beat: HeartbeatRecord) => HeartbeatRecord = (beat) => beat,
): Promise<Applied> {
  const { store } = ctx;
  const nowIso = new Date(now).toISOString();
  const resync = (signal.kind === "busy" || signal.kind === "idle") && signal.resync === true;
  // A status re-read is no event: an idle session says nothing of life, a busy one is vouched for by the server.
  const heartbeats = !(resync && signal.kind === "idle");
  const isEvent = heartbeats && !resync;
  const source: HeartbeatSource = "source" in signal ? signal.source : "sdk_session_updated";
  if (heartbeats) {
    store.writeHeartbeat(
      teamName,
      agentId,
      withUsage(nextHeartbeat(slot, nowIso, source, { event: isEvent })),
    );
  }
  let next: AgentState = agent;
  const desired = desiredStatus(signal, agent.status, serverActivity);
  if (desired && desired !== agent.status) next = { ...next, status: desired };
  if (heartbeats && agent.consecutiveMisses > 0)
    next = { ...next, consecutiveMisses: 0, lastMissAt: undefined };
  const waitingFor = nextWaiting(agent, signal, nowIso);
  if (waitingFor !== undefined) next = { ...next, waitingFor };
  const announce =
    signal.kind === "waiting" && waitingFor && agent.announcedRequestId !== signal.request.requestId;
  if (announce) next = { ...next, announcedRequestId: signal.request.requestId };
  next = clearedBySuccess(agent, next, signal);
  let told: ModelFailure | undefined;
  if (signal.kind === "error") {
    // The same error can arrive twice (plugin loaded twice, or hook and stream in two processes).
    const window = Math.max(ctx.options.eventCoalesceMs, 2_000);
    ({ next, told } = recordError(agent, next, signal, now, window));
  }
  if (next !== agent) {
    next = {
      ...next,
      ...(heartbeats ? { heartbeatTs: nowIso, heartbeatSource: source } : {}),
      ...(isEvent ? { lastEventAt: nowIso } : {}),
      updatedAt: nowIso,
    };
    // Liveness only (status, waiting request, error): see TeamStore.writeAgent.
    await store.writeAgent(next, { durable: false, blocking: true });
  }
  const outcome: ApplyOutcome = {
    ...(announce ? { asked: { agent: next, request: signal.request } } : {}),
    ...(told ? { failed: { agent: next, failure: told } } : {}),
  };
  return { next, outcome };
}

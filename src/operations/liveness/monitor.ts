import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { AgentState, AgentStatus, HeartbeatRecord, HeartbeatSource } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import { SessionIndex, type SessionOwner } from "../team/identity.ts";
import { UsageCounter, usageEvent } from "../usage/counter.ts";
import { rejectWhileRunning } from "./answer.ts";
import { isLive, isRunning, nextHeartbeat } from "./heartbeat.ts";
import { handOverInactive, type InactiveAgent, markedInactive } from "./inactive.ts";
import {
  classifyEvent,
  describeError,
  isContextOverflow,
  permissionAsked,
  questionAsked,
  type Signal,
} from "./signals.ts";
import { rejectedNotice, tellLeaderWaiting, type WaitingRequest, waitingNotice } from "./waiting.ts";

export interface MonitorStats {
  /** Events received (hook and stream). */
  events: number;
  /** Events about a known agent's session. */
  agentEvents: number;
  /** Locked state updates made (heartbeat slot and/or agent file). */
  writes: number;
  /** Events dropped by coalescing. */
  coalesced: number;
  /** Stream connections that delivered at least one event. */
  connects: number;
  /** Status re-reads after a (re)connect. */
  resyncs: number;
  failures: number;
}

interface ApplyOutcome {
  death?: Omit<InactiveAgent, "tasks">;
  /** A request seen for the first time: the leader is to hear of it. */
  asked?: { agent: AgentState; request: WaitingRequest };
}

/** The agent as an applied signal left it (tracked whether or not it was written), and what follows from it. */
interface Applied {
  next: AgentState;
  outcome?: ApplyOutcome;
}

interface Tracked {
  status: AgentStatus;
  misses: number;
  lastWriteAt: number;
}

/**
 * The passive heartbeat: turns OpenCode events about agents' sessions into liveness updates. One per process and
 * project (see background.ts). Events are processed one at a time, in arrival order, so a quick busy -> idle pair can
 * never be written in the wrong order; a heartbeat is written at most once per agent per `eventCoalesceMs`, while
 * status transitions, errors and deletions are written at once.
 */
export class EventMonitor {
  readonly stats: MonitorStats = {
    events: 0,
    agentEvents: 0,
    writes: 0,
    coalesced: 0,
    connects: 0,
    resyncs: 0,
    failures: 0,
  };
  private readonly index: SessionIndex;
  /** Each agent's tokens and cost, from the same events (specs/usage-and-budgets.md). */
  readonly usage: UsageCounter;
  private readonly tracked = new Map<string, Tracked>();
  /** What the server last said each agent session is doing; activity alone does not make an idle session busy. */
  private readonly serverActivity = new Map<string, "busy" | "idle">();
  private chain: Promise<void> = Promise.resolve();
  private pending = 0;

  constructor(
    private readonly ctx: TeamsContext,
    options: { indexRebuildMs?: number } = {},
  ) {
    this.index = new SessionIndex(ctx, options.indexRebuildMs ?? 2_000);
    this.usage = new UsageCounter(ctx, this.index, (task) => this.enqueue(task));
  }

  /** Accept an event; never throws and never blocks the caller (the OpenCode bus). */
  handleEvent(event: unknown): void {
    this.stats.events++;
    const signal = classifyEvent(event);
    if (signal) this.enqueue(() => this.process(signal));
    const usage = usageEvent(event);
    if (usage) this.enqueue(() => this.usage.apply(usage));
  }

  /** Resolves once every event accepted so far has been processed. */
  async settled(): Promise<void> {
    while (this.pending > 0) await this.chain;
  }

  private enqueue(task: () => Promise<void>): void {
    this.pending++;
    this.chain = this.chain
      .then(task)
      .catch((error: unknown) => {
        this.stats.failures++;
        this.ctx.log("warn", "liveness monitor could not apply an event", {
          error: error instanceof Error ? error.message : String(error),
        });
      })
      .finally(() => {
        this.pending--;
      });
  }

  /**
   * Read one connection of the server's event stream until it ends or `signal` aborts. Returns whether it delivered
   * anything (the caller's backoff resets then). OpenCode keeps no replay, so the first event of every connection
   * triggers a re-read of the session statuses.
   */
  async consume(server: OpencodeApi, signal: AbortSignal, onEvent?: () => void): Promise<boolean> {
    let connected = false;
    try {
      for await (const event of server.events(signal)) {
        onEvent?.();
        if (!connected) {
          connected = true;
          this.stats.connects++;
          this.enqueue(() => this.resync(server));
        }
        this.handleEvent(event);
      }
    } catch (error) {
      if (!signal.aborted) {
        this.ctx.log("debug", "event stream of the project server ended", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    return connected;
  }

  /**
   * Make state agree with `GET /session/status` after a gap in the stream, asking for every directory that has live
   * agents: the server lists a session's status only under the directory it was created in (the agent's `cwd`). A
   * directory that did not answer is left out; the others are still applied.
   */
  async resync(server: OpencodeApi): Promise<void> {
    this.index.invalidate();
    this.usage.forget();
    const live: AgentState[] = [];
    for (const teamName of await this.ctx.store.listTeamNames()) {
      const { items } = await this.ctx.store.listAgentViews(teamName);
      for (const { state } of items) if (state.role !== "leader" && isLive(state.status)) live.push(state);
    }
    const { statuses, failed } = await server.sessionStatuses([...new Set(live.map((state) => state.cwd))]);
    this.stats.resyncs++;
    for (const [directory, error] of Object.entries(failed)) {
      this.ctx.log("warn", "resync: the project's OpenCode server did not answer for a directory", {
        directory,
        error,
      });
    }
    for (const state of live) {
      // Unknown is not idle: the agents of a directory that did not answer keep the state they have.
      if (failed[state.cwd] !== undefined) continue;
      const activity = statuses[state.sessionId];
      if (activity === "busy" || activity === "retry") {
        await this.process({
          kind: "busy",
          sessionId: state.sessionId,
          source: "sdk_session_status",
          resync: true,
        });
      } else {
        this.serverActivity.set(state.sessionId, "idle");
        // Missing from the map means idle (or gone, which the sweep finds out); it is no sign of life.
        if (state.status === "active") {
          await this.process({
            kind: "idle",
            sessionId: state.sessionId,
            source: "sdk_session_status",
            resync: true,
          });
        }
      }
    }
    await this.reconcileWaiting(server, live);
    await this.usage.recount(live, server);
  }

  /** Requests asked or answered during a gap in the stream: the server's pending lists say which are open now. */
  private async reconcileWaiting(server: OpencodeApi, live: readonly AgentState[]): Promise<void> {
    const pending = await server
      .pendingRequests([...new Set(live.map((state) => state.cwd))])
      .catch(() => undefined);
    // A server without these lists (or one that did not answer) leaves waitingFor to the events and to idle.
    if (!pending) return;
    const open = new Map<string, Signal>();
    for (const item of pending) {
      const signal =
        item.kind === "permission" ? permissionAsked(item.properties) : questionAsked(item.properties);
      if (signal) open.set(signal.sessionId, signal);
    }
    for (const state of live) {
      const signal = open.get(state.sessionId);
      if (signal) await this.process(signal);
      else if (state.waitingFor)
        await this.process({
          kind: "answered",
          sessionId: state.sessionId,
          requestId: state.waitingFor.requestId,
        });
    }
  }

  /** The status `signal` moves an agent to, if any. A kill in progress owns the status of a shutting_down agent. */
  private desiredStatus(signal: Signal, current: AgentStatus): AgentStatus | undefined {
    if (current === "shutting_down") return undefined;
    switch (signal.kind) {
      case "busy":
        return "active";
      case "idle":
        return signal.resync && current !== "active" ? undefined : "idle";
      case "waiting":
        // A request is asked from inside a turn: the agent is at work, only paused.
        return "active";
      case "activity":
        if (signal.running) return "active";
        // Late updates after a turn ended (summaries, titles) must not flip an idle agent back to active.
        return this.serverActivity.get(signal.sessionId) === "idle" ? undefined : "active";
      default:
        return undefined;
    }
  }

  private async process(signal: Signal): Promise<void> {
    const owners = await this.index.lookup(signal.sessionId);
    if (owners.length === 0) return;
    this.stats.agentEvents++;
    if (signal.kind === "busy" || (signal.kind === "activity" && signal.running)) {
      this.serverActivity.set(signal.sessionId, "busy");
    }
    if (signal.kind === "idle") this.serverActivity.set(signal.sessionId, "idle");
    // Every team's record of the session hears it: a worker that leads its own team is alive in both.
    for (const owner of owners) await this.processFor(owner, signal);
  }

  private async processFor(owner: SessionOwner, signal: Signal): Promise<void> {
    let hit = owner;
    let key = `${hit.teamName}/${hit.agentId}`;
    let known = this.tracked.get(key);
    if (known && !isRunning(known.status)) {
      // resume-agent hands an ended agent's session to a new record: the session may have a live owner by now.
      const next = (await this.index.relookup(signal.sessionId)).find((o) => o.teamName === owner.teamName);
      if (!next || next.agentId === hit.agentId) return;
      hit = next;
      key = `${hit.teamName}/${hit.agentId}`;
      known = this.tracked.get(key);
      if (known && !isRunning(known.status)) return;
    }
    const urgent =
      signal.kind === "error" ||
      signal.kind === "deleted" ||
      signal.kind === "waiting" ||
      signal.kind === "answered" ||
      !known ||
      known.misses > 0 ||
      (this.desiredStatus(signal, known.status) ?? known.status) !== known.status;
    if (!urgent && known && this.ctx.clock.now() - known.lastWriteAt < this.ctx.options.eventCoalesceMs) {
      this.stats.coalesced++;
      return;
    }
    const outcome = await this.apply(hit.teamName, hit.agentId, key, signal);
    if (outcome?.death) {
      // Written without a flush under the lock (see applyDeleted), flushed before anything acts on it. A failed flush
      // does not undo the death, which is real and already visible: its tasks go back to the team all the same.
      await this.ctx.store.flushAgent(hit.teamName, hit.agentId).catch((error: unknown) => {
        this.ctx.log("warn", "could not flush an agent's death to disk", {
          agent: hit.agentId,
          error: errorText(error),
        });
      });
      await this.handOver(hit.teamName, outcome.death);
    }
    if (outcome?.asked) await this.announce(hit.teamName, outcome.asked.agent, outcome.asked.request);
  }

  /** Tell the leader once per request (the caller saw it first, under the agent's lock), or reject it when told to. */
  private async announce(teamName: string, agent: AgentState, request: WaitingRequest): Promise<void> {
    if (agent.headless && this.ctx.options.headlessPermissions === "reject") {
      try {
        if (!(await rejectWhileRunning(this.ctx, agent, request))) return;
        await tellLeaderWaiting(this.ctx, teamName, agent, rejectedNotice(agent, request));
        return;
      } catch (error) {
        this.ctx.log("warn", "could not reject a headless agent's request; the leader is asked instead", {
          agent: agent.agentId,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    await tellLeaderWaiting(this.ctx, teamName, agent, waitingNotice(agent, request));
  }

  /** What a waiting/answered/idle signal makes of `waitingFor`; undefined when it stays as it is. */
  private nextWaiting(
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
        // An idle session waits on nothing, whatever reply event the stream lost.
        return current ? null : undefined;
      default:
        return undefined;
    }
  }

  private async apply(
    teamName: string,
    agentId: string,
    key: string,
    signal: Signal,
  ): Promise<ApplyOutcome | undefined> {
    const { store } = this.ctx;
    return store.withAgentLock(teamName, agentId, async () => {
      const { agent: read, slot } = await store.readLiveness(teamName, agentId);
      if (read.kind !== "ok") {
        this.tracked.delete(key);
        return undefined;
      }
      const agent = read.value;
      const now = this.ctx.clock.now();
      // Events never revive an agent that was declared dead or terminated.
      if (!isRunning(agent.status)) {
        this.track(key, agent, now);
        return undefined;
      }
      this.stats.writes++;
      const applied =
        signal.kind === "deleted"
          ? await this.applyDeleted(agent, now)
          : await this.applySignal({ teamName, agentId, agent, slot: slot.record }, signal, now);
      this.track(key, applied.next, now);
      return applied.outcome;
    });
  }

  private track(key: string, state: AgentState, now: number): void {
    this.tracked.set(key, { status: state.status, misses: state.consecutiveMisses, lastWriteAt: now });
  }

  /** A deleted session is a death, except the leader's (the user's own session) and one a kill in progress deleted. */
  private async applyDeleted(agent: AgentState, now: number): Promise<Applied> {
    if (agent.role === "leader" || agent.status === "shutting_down") return { next: agent };
    const reason = `its OpenCode session ${agent.sessionId} was deleted`;
    const next = markedInactive(agent, reason, new Date(now).toISOString());
    // Blocking like every write under the agent's lock here; the caller flushes it once the lock is given back.
    await this.ctx.store.writeAgent(next, { durable: false, blocking: true });
    return { next, outcome: { death: { agent: next, cause: "session_deleted", reason } } };
  }

  /** Heartbeat, status, misses, waiting request and last error as the signal says; the agent file only if changed. */
  private async applySignal(
    {
      teamName,
      agentId,
      agent,
      slot,
    }: { teamName: string; agentId: string; agent: AgentState; slot?: HeartbeatRecord },
    signal: Exclude<Signal, { kind: "deleted" }>,
    now: number,
  ): Promise<Applied> {
    const { store } = this.ctx;
    const nowIso = new Date(now).toISOString();
    const resync = (signal.kind === "busy" || signal.kind === "idle") && signal.resync === true;
    // A status re-read is no event: an idle session says nothing of life, a busy one is vouched for by the server.
    const heartbeats = !(resync && signal.kind === "idle");
    const isEvent = heartbeats && !resync;
    const source: HeartbeatSource = "source" in signal ? signal.source : "sdk_session_updated";
    if (heartbeats) {
      const beat = nextHeartbeat(slot, nowIso, source, { event: isEvent });
      store.writeHeartbeat(teamName, agentId, this.usage.carry(teamName, agent, beat, now));
    }
    let next: AgentState = agent;
    const desired = this.desiredStatus(signal, agent.status);
    if (desired && desired !== agent.status) next = { ...next, status: desired };
    if (heartbeats && agent.consecutiveMisses > 0)
      next = { ...next, consecutiveMisses: 0, lastMissAt: undefined };
    const waitingFor = this.nextWaiting(agent, signal, nowIso);
    if (waitingFor !== undefined) next = { ...next, waitingFor };
    const announce =
      signal.kind === "waiting" && waitingFor && agent.announcedRequestId !== signal.request.requestId;
    if (announce) next = { ...next, announcedRequestId: signal.request.requestId };
    if (signal.kind === "error") next = this.withError(agent, next, signal, now);
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
    return announce ? { next, outcome: { asked: { agent: next, request: signal.request } } } : { next };
  }

  /** `next` with the error recorded, unless `agent` has the same error from within the duplicate window. */
  private withError(
    agent: AgentState,
    next: AgentState,
    signal: Extract<Signal, { kind: "error" }>,
    now: number,
  ): AgentState {
    const description = describeError(signal.name, signal.message);
    const window = Math.max(this.ctx.options.eventCoalesceMs, 2_000);
    // The same error can arrive twice (plugin loaded twice, or hook and stream in two processes).
    const duplicate =
      agent.lastError === description &&
      agent.lastErrorAt !== undefined &&
      now - Date.parse(agent.lastErrorAt) < window;
    if (duplicate) return next;
    return {
      ...next,
      lastError: description,
      lastErrorAt: new Date(now).toISOString(),
      sessionRotationCount:
        next.sessionRotationCount + (isContextOverflow(signal.name, signal.message) ? 1 : 0),
    };
  }

  private async handOver(teamName: string, death: Omit<InactiveAgent, "tasks">): Promise<void> {
    const team = await this.ctx.store.readTeam(teamName);
    if (team.kind !== "ok") return;
    await handOverInactive(this.ctx, team.value, [death]);
  }
}

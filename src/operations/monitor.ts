import type { OpencodeApi } from "../edges/opencode-api.ts";
import type { AgentState, AgentStatus, HeartbeatSource } from "../state/schemas.ts";
import type { TeamsContext } from "./context.ts";
import { isLive, isRunning, nextHeartbeat } from "./heartbeat.ts";
import { SessionIndex, type SessionOwner } from "./identity.ts";
import { handOverInactive, type InactiveAgent, markedInactive } from "./inactive.ts";

/** What an OpenCode event says about a session, reduced to what liveness needs. */
export type Signal =
  | { kind: "busy"; sessionId: string; source: HeartbeatSource; resync?: boolean }
  | { kind: "idle"; sessionId: string; source: HeartbeatSource; resync?: boolean }
  /** `running`: a tool part that is pending or running, so a turn is certainly under way. */
  | { kind: "activity"; sessionId: string; source: HeartbeatSource; running: boolean }
  | { kind: "error"; sessionId: string; name: string; message: string | undefined }
  | { kind: "deleted"; sessionId: string };

type Json = Record<string, unknown>;

function record(value: unknown): Json | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Json) : undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * Map an event (in-process bus or SSE; same shape) to a signal. Shapes are read defensively: the stream also carries
 * events the SDK types do not list, and a field missing in some version must not throw.
 */
export function classifyEvent(event: unknown): Signal | undefined {
  const root = record(event);
  const type = text(root?.type);
  const props = record(root?.properties) ?? {};
  const info = record(props.info);
  switch (type) {
    case "session.status": {
      const sessionId = text(props.sessionID);
      const status = text(record(props.status)?.type);
      if (!sessionId || !status) return undefined;
      if (status === "busy" || status === "retry")
        return { kind: "busy", sessionId, source: "sdk_session_status" };
      if (status === "idle") return { kind: "idle", sessionId, source: "sdk_session_status" };
      return undefined;
    }
    case "session.idle": {
      const sessionId = text(props.sessionID);
      return sessionId ? { kind: "idle", sessionId, source: "sdk_session_idle" } : undefined;
    }
    case "session.updated": {
      const sessionId = text(props.sessionID) ?? text(info?.id);
      return sessionId
        ? { kind: "activity", sessionId, source: "sdk_session_updated", running: false }
        : undefined;
    }
    case "session.deleted": {
      const sessionId = text(props.sessionID) ?? text(info?.id);
      return sessionId ? { kind: "deleted", sessionId } : undefined;
    }
    case "session.error": {
      const sessionId = text(props.sessionID);
      if (!sessionId) return undefined;
      const error = record(props.error);
      return {
        kind: "error",
        sessionId,
        name: text(error?.name) ?? "UnknownError",
        message: text(record(error?.data)?.message),
      };
    }
    case "message.updated": {
      const sessionId = text(props.sessionID) ?? text(info?.sessionID);
      return sessionId ? { kind: "activity", sessionId, source: "sdk_message", running: false } : undefined;
    }
    case "message.part.updated": {
      const part = record(props.part);
      const sessionId = text(props.sessionID) ?? text(part?.sessionID);
      if (!sessionId) return undefined;
      if (part?.type !== "tool")
        return { kind: "activity", sessionId, source: "sdk_message", running: false };
      const status = text(record(part.state)?.status);
      return {
        kind: "activity",
        sessionId,
        source: "sdk_tool_execute",
        running: status === "pending" || status === "running",
      };
    }
    default:
      return undefined;
  }
}

/** OpenCode names this error ContextOverflowError; providers' own wording shows up inside APIError messages. */
export function isContextOverflow(name: string, message: string | undefined): boolean {
  if (name === "ContextOverflowError") return true;
  return /context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|context window/i.test(
    message ?? "",
  );
}

function describeError(name: string, message: string | undefined): string {
  return message ? `${name}: ${message}` : name;
}

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
  }

  /** Accept an event; never throws and never blocks the caller (the OpenCode bus). */
  handleEvent(event: unknown): void {
    this.stats.events++;
    const signal = classifyEvent(event);
    if (signal) this.enqueue(() => this.process(signal));
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
  }

  /** The status `signal` moves an agent to, if any. A kill in progress owns the status of a shutting_down agent. */
  private desiredStatus(signal: Signal, current: AgentStatus): AgentStatus | undefined {
    if (current === "shutting_down") return undefined;
    switch (signal.kind) {
      case "busy":
        return "active";
      case "idle":
        return signal.resync && current !== "active" ? undefined : "idle";
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
      !known ||
      known.misses > 0 ||
      (this.desiredStatus(signal, known.status) ?? known.status) !== known.status;
    if (!urgent && known && this.ctx.clock.now() - known.lastWriteAt < this.ctx.options.eventCoalesceMs) {
      this.stats.coalesced++;
      return;
    }
    const death = await this.apply(hit.teamName, hit.agentId, key, signal);
    if (death) await this.handOver(hit.teamName, death);
  }

  private async apply(
    teamName: string,
    agentId: string,
    key: string,
    signal: Signal,
  ): Promise<Omit<InactiveAgent, "tasks"> | undefined> {
    const { store } = this.ctx;
    return store.withAgentLock(teamName, agentId, async () => {
      const [read, slot] = await Promise.all([
        store.readAgent(teamName, agentId),
        store.readHeartbeat(teamName, agentId),
      ]);
      if (read.kind !== "ok") {
        this.tracked.delete(key);
        return undefined;
      }
      const agent = read.value;
      const now = this.ctx.clock.now();
      const nowIso = new Date(now).toISOString();
      const track = (state: AgentState) =>
        this.tracked.set(key, {
          status: state.status,
          misses: state.consecutiveMisses,
          lastWriteAt: now,
        });
      // Events never revive an agent that was declared dead or terminated.
      if (!isRunning(agent.status)) {
        track(agent);
        return undefined;
      }
      this.stats.writes++;

      if (signal.kind === "deleted") {
        // The leader is the user's own session, and a kill in progress deletes the session itself.
        if (agent.role === "leader" || agent.status === "shutting_down") {
          track(agent);
          return undefined;
        }
        const reason = `its OpenCode session ${agent.sessionId} was deleted`;
        const next = markedInactive(agent, reason, nowIso);
        await store.writeAgent(next);
        track(next);
        return { agent: next, cause: "session_deleted", reason };
      }

      let next: AgentState = agent;
      const resync = (signal.kind === "busy" || signal.kind === "idle") && signal.resync === true;
      // A status re-read is no event: an idle session says nothing of life, a busy one is vouched for by the server.
      const heartbeats = !(resync && signal.kind === "idle");
      const isEvent = heartbeats && !resync;
      const source: HeartbeatSource = signal.kind === "error" ? "sdk_session_updated" : signal.source;
      if (heartbeats) {
        await store.writeHeartbeat(
          teamName,
          agentId,
          nextHeartbeat(slot.record, nowIso, source, { event: isEvent }),
        );
      }
      const desired = this.desiredStatus(signal, agent.status);
      if (desired && desired !== agent.status) next = { ...next, status: desired };
      if (heartbeats && agent.consecutiveMisses > 0)
        next = { ...next, consecutiveMisses: 0, lastMissAt: undefined };
      if (signal.kind === "error") {
        const description = describeError(signal.name, signal.message);
        const window = Math.max(this.ctx.options.eventCoalesceMs, 2_000);
        // The same error can arrive twice (plugin loaded twice, or hook and stream in two processes).
        const duplicate =
          agent.lastError === description &&
          agent.lastErrorAt !== undefined &&
          now - Date.parse(agent.lastErrorAt) < window;
        if (!duplicate) {
          next = {
            ...next,
            lastError: description,
            lastErrorAt: nowIso,
            sessionRotationCount:
              next.sessionRotationCount + (isContextOverflow(signal.name, signal.message) ? 1 : 0),
          };
        }
      }
      if (next !== agent) {
        next = {
          ...next,
          ...(heartbeats ? { heartbeatTs: nowIso, heartbeatSource: source } : {}),
          ...(isEvent ? { lastEventAt: nowIso } : {}),
          updatedAt: nowIso,
        };
        await store.writeAgent(next);
      }
      track(next);
      return undefined;
    });
  }

  private async handOver(teamName: string, death: Omit<InactiveAgent, "tasks">): Promise<void> {
    const team = await this.ctx.store.readTeam(teamName);
    if (team.kind !== "ok") return;
    await handOverInactive(this.ctx, team.value, [death]);
  }
}

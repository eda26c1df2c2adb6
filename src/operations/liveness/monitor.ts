// The passive heartbeat's event dispatch: OpenCode events queued in arrival order, each signal routed to the agents
// whose session it is (coalesced when nothing changes), applied under the agent's lock (apply-signal.ts), and what
// follows (a death handed over, a request or a failing model told to the leader) done once the lock is free.
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { AgentState, AgentStatus } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import { SessionIndex, type SessionOwner } from "../team/identity.ts";
import { parseAgentSessionTitle } from "../team/identity-prompt.ts";
import { UsageCounter, usageEvent } from "../usage/counter.ts";
import { announceWaiting } from "./answer.ts";
import { type ApplyOutcome, applyDeleted, applySignal, desiredStatus } from "./apply-signal.ts";
import { SessionFamily } from "./child-sessions.ts";
import { isRunning } from "./heartbeat.ts";
import { handOverInactive, type InactiveAgent } from "./inactive.ts";
import { MessageWatches } from "./message-watch.ts";
import { tellLeaderFailing } from "./model-failure.ts";
import { resyncAgents } from "./resync.ts";
import { classifyEvent, type Signal } from "./signals.ts";

/** How long the queue waits after an agent's session is created (see EventMonitor.holdForFirstTurn). */
const NEW_AGENT_HOLD_MS = 200;

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
  /** Its model was failing when last read: a turn that succeeds must be written at once to clear it. */
  failing: boolean;
  /** It ended and resume-agent continues it as this agent: its session's events are the successor's. */
  successor?: string;
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
  /** Subagents' sessions, whose signals are their agent's. */
  private readonly family: SessionFamily;
  private readonly tracked = new Map<string, Tracked>();
  /** What the server last said each agent session is doing; activity alone does not make an idle session busy. */
  private readonly serverActivity = new Map<string, "busy" | "idle">();
  private chain: Promise<void> = Promise.resolve();
  private pending = 0;
  /** A hold for a new agent's first turn is queued or under way (see `holdForFirstTurn`). */
  private holding = false;
  /** Who waits for a session's next prompt or model call, told as its event arrives (see message-watch.ts). */
  readonly messages: MessageWatches;

  constructor(
    private readonly ctx: TeamsContext,
    options: { indexRebuildMs?: number } = {},
  ) {
    this.index = new SessionIndex(ctx, options.indexRebuildMs ?? 2_000);
    this.usage = new UsageCounter(ctx, this.index, (task) => this.enqueue(task));
    this.family = new SessionFamily(ctx);
    this.messages = new MessageWatches(ctx.clock);
  }

  /** Accept an event; never throws and never blocks the caller (the OpenCode bus). */
  handleEvent(event: unknown): void {
    this.stats.events++;
    if (this.messages.watching) this.messages.note(event);
    const created = this.family.learn(event);
    if (created) {
      this.usage.born(created.sessionId);
      if (created.title !== undefined && parseAgentSessionTitle(created.title)) {
        this.index.expect(created.sessionId);
        this.holdForFirstTurn();
      }
    }
    const signal = classifyEvent(event);
    const usage = usageEvent(event);
    // One task for both: a message update is most of a busy stream, and each queued task costs a turn of the queue.
    if (signal && usage) {
      // Most events of a busy stream are done without anything to await: a coalesced heartbeat (see `process`), a
      // count inside its window (UsageCounter.apply).
      this.enqueue(() => {
        const processing = this.process(signal);
        return processing ? processing.then(() => this.usage.apply(usage)) : this.usage.apply(usage);
      });
    } else if (signal) this.enqueue(() => this.process(signal));
    else if (usage) this.enqueue(() => this.usage.apply(usage));
  }

  /**
   * A new agent's session was just created: its first turn, on its way to its first model request, runs in the project
   * server's process, and the work its first events bring here (finding its file, its first state write) ran beside
   * that turn and delayed it by about 20 ms. The queue goes on after NEW_AGENT_HOLD_MS instead; the events wait in
   * order and nothing is lost (the spawn has written the agent as running already). One hold at a time: agents
   * created together share it, so five spawns at once hold the queue 200 ms, not a second.
   */
  private holdForFirstTurn(): void {
    if (this.holding) return;
    this.holding = true;
    this.chain = this.chain
      .then(() => this.ctx.clock.sleep(NEW_AGENT_HOLD_MS))
      .finally(() => {
        this.holding = false;
      });
  }

  /** Resolves once every event accepted so far has been processed. */
  async settled(): Promise<void> {
    while (this.pending > 0) await this.chain;
  }

  /** Run `task` after every task queued before it; a task that returns no promise was done when it returned. */
  private enqueue(task: () => Promise<void> | undefined): void {
    this.pending++;
    this.chain = this.chain.then(() => this.run(task));
  }

  /** One task of the queue; a failure is logged, never passed on to the next. */
  private run(task: () => Promise<void> | undefined): Promise<void> | undefined {
    let running: Promise<void> | undefined;
    try {
      running = task();
    } catch (error) {
      this.failed(error);
    }
    if (!running) {
      this.pending--;
      return undefined;
    }
    return running.then(
      () => {
        this.pending--;
      },
      (error: unknown) => {
        this.failed(error);
        this.pending--;
      },
    );
  }

  private failed(error: unknown): void {
    this.stats.failures++;
    this.ctx.log("warn", "liveness monitor could not apply an event", {
      error: error instanceof Error ? error.message : String(error),
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

  /** Make state agree with the server after a gap in the stream (see resync.ts). */
  async resync(server: OpencodeApi): Promise<void> {
    this.index.invalidate();
    this.usage.forget();
    const live = await resyncAgents(this.ctx, server, {
      process: async (signal) => this.process(signal),
      serverActivity: this.serverActivity,
      counted: () => {
        this.stats.resyncs++;
      },
    });
    await this.usage.recount(live, server);
  }

  /**
   * Apply a signal to the records of its session. Undefined when that is done already: the session known to the index
   * and every record of it only refreshed lately (the signal coalesced), which is most events of a busy stream.
   */
  private process(signal: Signal): Promise<void> | undefined {
    const owners = this.index.known(signal.sessionId);
    return owners ? this.processOwners(signal, owners) : this.processLookedUp(signal);
  }

  private async processLookedUp(signal: Signal): Promise<void> {
    await this.processOwners(signal, await this.index.lookup(signal.sessionId));
  }

  private processOwners(signal: Signal, owners: readonly SessionOwner[]): Promise<void> | undefined {
    if (owners.length === 0) return this.processChild(signal);
    this.stats.agentEvents++;
    if (signal.kind === "busy" || (signal.kind === "activity" && signal.running)) {
      this.serverActivity.set(signal.sessionId, "busy");
    }
    if (signal.kind === "idle") this.serverActivity.set(signal.sessionId, "idle");
    // Every team's record of the session hears it: a worker that leads its own team is alive in both.
    for (let i = 0; i < owners.length; i++) {
      const owner = owners[i] as SessionOwner;
      if (!this.coalesces(this.tracked.get(`${owner.teamName}/${owner.agentId}`), signal))
        return this.processEach(owners.slice(i), signal);
      this.stats.coalesced++;
    }
    return undefined;
  }

  private async processEach(owners: readonly SessionOwner[], signal: Signal): Promise<void> {
    for (const owner of owners) await this.processFor(owner, signal);
  }

  /**
   * Whether `signal` changes nothing for a running agent but its heartbeat, written less than `eventCoalesceMs` ago:
   * then it is not written (status transitions, errors, requests and deletions always are).
   */
  private coalesces(known: Tracked | undefined, signal: Signal): boolean {
    if (!known || !isRunning(known.status)) return false;
    const urgent =
      signal.kind === "error" ||
      signal.kind === "deleted" ||
      signal.kind === "waiting" ||
      signal.kind === "answered" ||
      // A subagent's idle may end the request it asked (apply-signal.ts).
      (signal.kind === "idle" && signal.child !== undefined) ||
      (signal.kind === "activity" && signal.succeeded === true && known.failing) ||
      known.misses > 0 ||
      (desiredStatus(signal, known.status, this.serverActivity) ?? known.status) !== known.status;
    return !urgent && this.ctx.clock.now() - known.lastWriteAt < this.ctx.options.eventCoalesceMs;
  }

  /** A session no agent owns may be a subagent's: its signal is then its agent's (server activity stays its own). */
  private async processChild(signal: Signal): Promise<void> {
    const mapped = await this.family.asAgents(signal, (id) => this.index.lookup(id));
    if (!mapped) return;
    this.stats.agentEvents++;
    for (const owner of mapped.owners) await this.processFor(owner, mapped.signal);
  }

  private async processFor(owner: SessionOwner, signal: Signal, retried = false): Promise<void> {
    let hit = owner;
    let key = `${hit.teamName}/${hit.agentId}`;
    let known = this.tracked.get(key);
    if (known && !isRunning(known.status)) {
      // resume-agent hands an ended agent's session to a new record: the session may have a live owner by now.
      const owners = await this.index.relookup(signal.sessionId, known.successor !== undefined);
      const next = owners.find((o) => o.teamName === owner.teamName);
      if (!next || next.agentId === hit.agentId) return;
      hit = next;
      key = `${hit.teamName}/${hit.agentId}`;
      known = this.tracked.get(key);
      if (known && !isRunning(known.status)) return;
    }
    // Not running here means ended and not resumed (see above): `known` is undefined or a running agent.
    if (this.coalesces(known, signal)) {
      this.stats.coalesced++;
      return;
    }
    const outcome = await this.apply(hit.teamName, hit.agentId, key, signal);
    if (outcome?.successor && !retried) {
      // Ended since we last looked, and resumed: its successor owns the session now, whatever the index still says.
      const next = (await this.index.relookup(signal.sessionId, true)).find(
        (o) => o.teamName === hit.teamName && o.agentId === outcome.successor,
      );
      if (next) await this.processFor(next, signal, true);
      return;
    }
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
    if (outcome?.asked)
      await announceWaiting(this.ctx, hit.teamName, outcome.asked.agent, outcome.asked.request);
    if (outcome?.failed)
      await tellLeaderFailing(this.ctx, hit.teamName, outcome.failed.agent, outcome.failed.failure);
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
        return agent.resumedBy ? { successor: agent.resumedBy } : undefined;
      }
      this.stats.writes++;
      const applied =
        signal.kind === "deleted"
          ? await applyDeleted(this.ctx, agent, now)
          : await applySignal(
              this.ctx,
              { teamName, agentId, agent, slot: slot.record },
              signal,
              now,
              this.serverActivity,
              (beat) => this.usage.carry(teamName, agent, beat, now),
            );
      this.track(key, applied.next, now);
      return applied.outcome;
    });
  }

  private track(key: string, state: AgentState, now: number): void {
    this.tracked.set(key, {
      status: state.status,
      misses: state.consecutiveMisses,
      lastWriteAt: now,
      failing: Boolean(state.failing),
      ...(state.resumedBy ? { successor: state.resumedBy } : {}),
    });
  }

  private async handOver(teamName: string, death: Omit<InactiveAgent, "tasks">): Promise<void> {
    const team = await this.ctx.store.readTeam(teamName);
    if (team.kind !== "ok") return;
    await handOverInactive(this.ctx, team.value, [death]);
  }
}

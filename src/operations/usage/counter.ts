import { isoNow } from "../../clock.ts";
import { assistantUsage } from "../../edges/message-usage.ts";
import type { MessageUsage, OpencodeApi } from "../../edges/opencode-api.ts";
import { jsonRecord } from "../../json-record.ts";
import type { AgentState, HeartbeatRecord } from "../../state/schemas.ts";
import type { UsageTotals } from "../../state/usage-schema.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import type { SessionIndex, SessionOwner } from "../team/identity.ts";
import { BUDGET_WARN_AT, checkBudgets } from "./budget.ts";
import { type LastWrite, LastWrites } from "./last-writes.ts";
import { SessionCount } from "./session-count.ts";
import { budgetFraction, runShare, sameSums, type UsageSums } from "./totals.ts";

/** `a` counts less than `b` in some respect: fewer turns, tokens or dollars. */
function behind(a: UsageTotals, b: UsageTotals): boolean {
  return a.turns < b.turns || a.total < b.total || a.costUsd < b.costUsd;
}

/** What an OpenCode event says about usage: an assistant message's latest values, or a message that was removed. */
export type UsageEvent =
  | { kind: "message"; usage: MessageUsage }
  | { kind: "removed"; sessionId: string; messageId: string };

export function usageEvent(event: unknown): UsageEvent | undefined {
  const root = jsonRecord(event);
  const props = jsonRecord(root?.properties);
  if (root?.type === "message.updated") {
    const usage = assistantUsage(props?.info);
    return usage ? { kind: "message", usage } : undefined;
  }
  if (root?.type === "message.removed") {
    const { sessionID, messageID } = props ?? {};
    if (typeof sessionID === "string" && typeof messageID === "string")
      return { kind: "removed", sessionId: sessionID, messageId: messageID };
  }
  return undefined;
}

/** A failed count of a session from the server is tried again at most this often (an unreachable server). */
const RECOUNT_RETRY_MS = 5_000;
/** How many sessions born in this process are remembered as such (see UsageCounter.born). */
const BORN_REMEMBERED = 5_000;
/** How long whether a team has a budget is taken as known (see UsageCounter.budgeted). */
const TEAM_REREAD_MS = 10_000;

export interface UsageStats {
  /** Usage events about known sessions. */
  events: number;
  /** Agent files written with new usage. */
  writes: number;
  /** Changes left for the trailing write of their agent (see `record`). */
  coalesced: number;
  /** Counts that went out with the monitor's heartbeat write of their agent (see `carry`), no write of their own. */
  carried: number;
  /** Sessions counted from the server's message list. */
  recounts: number;
}

/**
 * Counts each agent's usage from the event stream, message by message at its latest value, so an update seen ten
 * times counts once. A session is first counted from the server's message list (after a process start or a gap in
 * the stream, see `forget`); events then replace single messages. The agent file is written under the agent's lock
 * when its totals changed, at most once per `eventCoalesceMs` (a trailing write brings the last change), except for
 * an agent at 80% of its budget or more, which is written and checked at every change; budgets are checked after each
 * write.
 */
export class UsageCounter {
  readonly stats: UsageStats = { events: 0, writes: 0, coalesced: 0, carried: 0, recounts: 0 };
  /** Sessions counted in this process (from the server, or from nothing when born here) and their sums. */
  private readonly sessions = new Map<string, SessionCount>();
  private readonly failedAt = new Map<string, number>();
  /** Sessions this process saw created since the last `forget` (see `born`); bounded, it starts over when full. */
  private readonly bornHere = new Set<string>();
  private readonly lastWrites = new LastWrites();
  /** Sessions whose trailing write is scheduled. */
  private readonly trailing = new Set<string>();
  private readonly teamBudgets = new Map<string, { budgeted: boolean; at: number }>();

  constructor(
    private readonly ctx: TeamsContext,
    private readonly index: SessionIndex,
    /** Runs a task in the monitor's queue, in order with the events (one that returns no promise is done). */
    private readonly enqueue: (task: () => Promise<void> | undefined) => void,
  ) {}
  /**
   * The monitor's heartbeat write of an agent takes the agent's latest count along (`record` is what it is about to
   * write into the slot, under the agent's lock), so a busy agent costs one slot write per window, not two. Only for an
   * agent without a budget whose team is known to have none: budgets are checked where the counter writes.
   */
  carry(teamName: string, agent: AgentState, record: HeartbeatRecord, now: number): HeartbeatRecord {
    const session = this.sessions.get(agent.sessionId);
    if (!session || agent.resumedBy || agent.budget) return record;
    // Known to have no budget, and lately: once that is old the counter's own write looks again (see `budgeted`).
    if (this.knownTeam(teamName, now)?.budgeted !== false) return record;
    const run = runShare(session.sums(), agent.usageBase);
    const counted = record.usage;
    if (counted && behind(run.totals, counted.totals)) return record;
    // Written now either way: the record goes out with this count, new or as it was.
    this.lastWrites.note(teamName, agent.sessionId, now, undefined, agent.usageBase);
    if (counted && sameSums(counted, run)) return record;
    this.stats.carried++;
    return { ...record, usage: { ...run, countedAt: new Date(now).toISOString() } };
  }

  /** The stream had a gap: what this process counted may have missed messages, so every session is counted again. */
  forget(): void {
    this.sessions.clear();
    this.failedAt.clear();
    this.bornHere.clear();
  }

  /**
   * A session whose `session.created` this process saw: every message it will have comes after, through the same
   * stream, so it is counted from nothing rather than from the server's message list. Asking the server was a request
   * to it in the middle of a new agent's first turn, which that turn waited for.
   */
  born(sessionId: string): void {
    if (this.bornHere.size >= BORN_REMEMBERED) this.bornHere.clear();
    this.bornHere.add(sessionId);
  }

  /**
   * Count one event. Most events of a busy stream need nothing awaited (their session, its records and their teams
   * known, the change inside a window): those are done when this returns undefined, without a turn of the event loop;
   * otherwise the promise of the rest is returned.
   */
  apply(event: UsageEvent): Promise<void> | undefined {
    const sessionId = event.kind === "message" ? event.usage.sessionId : event.sessionId;
    const owners = this.index.known(sessionId);
    return owners ? this.applyFor(event, sessionId, owners) : this.applyLookedUp(event, sessionId);
  }

  private async applyLookedUp(event: UsageEvent, sessionId: string): Promise<void> {
    await this.applyFor(event, sessionId, await this.index.lookup(sessionId));
  }

  private applyFor(
    event: UsageEvent,
    sessionId: string,
    owners: readonly SessionOwner[],
  ): Promise<void> | undefined {
    // Sessions the plugin does not know (the user's other sessions, another project's) are none of its business.
    if (owners.length === 0) return undefined;
    this.stats.events++;
    const now = this.ctx.clock.now();
    const session = this.sessions.get(sessionId);
    if (!session || !this.teamsKnown(owners, now)) return this.applyAfterReads(event, sessionId, owners, now);
    this.change(session, event);
    return this.record(sessionId, owners, session);
  }

  /** `apply` for a session not counted yet in this process, or an owner's team not read lately. */
  private async applyAfterReads(
    event: UsageEvent,
    sessionId: string,
    owners: readonly SessionOwner[],
    now: number,
  ): Promise<void> {
    // Kept fresh while usage flows, so the monitor's heartbeat writes may carry counts (see `carry`); a team read
    // lately is not waited for.
    for (const owner of owners)
      if (!this.knownTeam(owner.teamName, now)) await this.teamBudgeted(owner.teamName);
    const session = this.sessions.get(sessionId) ?? (await this.firstCount(sessionId, owners));
    if (!session) return;
    this.change(session, event);
    await this.record(sessionId, owners, session);
  }

  private change(session: SessionCount, event: UsageEvent): void {
    if (event.kind === "removed") session.delete(event.messageId);
    else session.set(event.usage);
  }

  /** A session's count as it starts in this process: nothing for one born here, else the server's. */
  private async firstCount(
    sessionId: string,
    owners: readonly SessionOwner[],
  ): Promise<SessionCount | undefined> {
    if (!this.bornHere.has(sessionId)) return this.countFromServer(sessionId, owners);
    const session = new SessionCount([]);
    this.sessions.set(sessionId, session);
    return session;
  }

  /** Count these agents' sessions from the server now (after a reconnect), whatever events come later. */
  async recount(agents: readonly AgentState[], server: OpencodeApi): Promise<void> {
    for (const agent of agents) {
      const owners = await this.index.lookup(agent.sessionId);
      if (owners.length === 0) continue;
      const session = await this.countFromServer(agent.sessionId, owners, server);
      if (session) await this.record(agent.sessionId, owners, session, true);
    }
  }

  /** The session's messages as the server lists them; undefined (and tried again later) when it cannot be asked. */
  private async countFromServer(
    sessionId: string,
    owners: readonly SessionOwner[],
    server?: OpencodeApi,
  ): Promise<SessionCount | undefined> {
    const now = this.ctx.clock.now();
    if (!server && now - (this.failedAt.get(sessionId) ?? Number.NEGATIVE_INFINITY) < RECOUNT_RETRY_MS)
      return undefined;
    const leader = owners.some((owner) => owner.role === "leader");
    for (const candidate of server ? [server] : await this.serversFor(leader)) {
      try {
        const session = new SessionCount(await candidate.messageUsage(sessionId));
        this.sessions.set(sessionId, session);
        this.failedAt.delete(sessionId);
        this.stats.recounts++;
        return session;
      } catch (error) {
        this.ctx.log("debug", "could not count a session's usage from the server", {
          sessionId,
          server: candidate.baseUrl,
          error: errorText(error),
        });
      }
    }
    this.failedAt.set(sessionId, now);
    return undefined;
  }

  /** The leader's session lives in the leader's own OpenCode (this process's, usually); agents' on the project server. */
  private async serversFor(leader: boolean): Promise<OpencodeApi[]> {
    const project = await this.ctx.edges.projectServer().catch(() => undefined);
    const local = this.ctx.edges.localServer;
    const ordered = leader ? [local, project] : [project, local];
    return ordered.filter(
      (server, i): server is OpencodeApi =>
        server !== undefined && ordered.findIndex((other) => other?.baseUrl === server.baseUrl) === i,
    );
  }

  /**
   * Each owner's record gets the session's sums less what the session had spent before its run began. A change inside
   * the window of an owner's last write waits for the trailing write; undefined when no owner is written now.
   */
  private record(
    sessionId: string,
    owners: readonly SessionOwner[],
    session: SessionCount,
    force = false,
  ): Promise<void> | undefined {
    const now = this.ctx.clock.now();
    let due: SessionOwner[] | undefined;
    for (const owner of owners) {
      const last = this.lastWrites.get(owner.teamName, sessionId);
      if (!force && last && !this.due(last, session, now)) {
        this.stats.coalesced++;
        this.writeLater(sessionId, last.at + this.ctx.options.eventCoalesceMs - now);
      } else if (due) due.push(owner);
      else due = [owner];
    }
    return due && this.writeNow(sessionId, due, session, force, now);
  }

  private async writeNow(
    sessionId: string,
    owners: readonly SessionOwner[],
    session: SessionCount,
    force: boolean,
    now: number,
  ): Promise<void> {
    for (const owner of owners) {
      const outcome = await this.write(owner.teamName, owner.agentId, sessionId, session.sums(), force);
      if (!outcome) continue;
      this.lastWrites.note(owner.teamName, sessionId, now, outcome.state.budget, outcome.state.usageBase);
      if (!outcome.changed) continue;
      this.stats.writes++;
      if (await this.budgeted(outcome.state)) await checkBudgets(this.ctx, outcome.state);
    }
  }

  /**
   * Whether a budget applies to the agent: its own, or its team's. Whether the team has one is read from its config at
   * most every TEAM_REREAD_MS: a budget set on a team takes effect within that.
   */
  private async budgeted(agent: AgentState): Promise<boolean> {
    if (agent.role === "leader") return false;
    if (agent.budget) return true;
    return this.teamBudgeted(agent.teamName);
  }

  private teamsKnown(owners: readonly SessionOwner[], now: number): boolean {
    for (const owner of owners) if (!this.knownTeam(owner.teamName, now)) return false;
    return true;
  }

  /** Whether the team has a budget, as read within the last TEAM_REREAD_MS; undefined when not read lately. */
  private knownTeam(teamName: string, now: number): { budgeted: boolean } | undefined {
    const known = this.teamBudgets.get(teamName);
    return known && now - known.at < TEAM_REREAD_MS ? known : undefined;
  }

  private async teamBudgeted(teamName: string): Promise<boolean> {
    const now = this.ctx.clock.now();
    const known = this.knownTeam(teamName, now);
    if (known) return known.budgeted;
    const team = await this.ctx.store.readTeam(teamName);
    const budgeted = team.kind === "ok" && team.value.budget !== undefined;
    this.teamBudgets.set(teamName, { budgeted, at: now });
    return budgeted;
  }

  /** A change is written now when the last write is old enough, or when the agent is near its budget. */
  private due(last: LastWrite, session: SessionCount, now: number): boolean {
    if (now - last.at >= this.ctx.options.eventCoalesceMs) return true;
    if (!last.budget) return false;
    return budgetFraction(runShare(session.sums(), last.base).totals, last.budget) >= BUDGET_WARN_AT;
  }

  /** The session's last change, written when the window of its last write ends (in the monitor's queue). */
  private writeLater(sessionId: string, waitMs: number): void {
    if (this.trailing.has(sessionId)) return;
    this.trailing.add(sessionId);
    this.trailingWrite(sessionId, waitMs);
  }

  private trailingWrite(sessionId: string, waitMs: number): void {
    void this.ctx.clock.sleep(Math.max(0, waitMs), undefined, { background: true }).then(() => {
      // A write since (most often a heartbeat that carried the count) opened a new window: the change waits for its
      // end, and no turn of the queue is needed to know it. Writes only ever open later windows, so a session not due
      // now is not due sooner whatever the queue holds.
      const left = this.notDueFor(sessionId);
      if (left !== undefined) return this.trailingWrite(sessionId, left);
      this.enqueue(() => {
        this.trailing.delete(sessionId);
        const session = this.sessions.get(sessionId);
        if (!session) return undefined;
        // Due by now unless a write came meanwhile: then the change waits for that write's window.
        const owners = this.index.known(sessionId);
        if (owners) return this.record(sessionId, owners, session);
        return this.index.lookup(sessionId).then((found) => this.record(sessionId, found, session));
      });
    });
  }

  /** How long until the window of every record of the session has ended; undefined when one has (or is in doubt). */
  private notDueFor(sessionId: string): number | undefined {
    const owners = this.index.known(sessionId);
    if (!owners || owners.length === 0) return undefined;
    const now = this.ctx.clock.now();
    let left = Number.POSITIVE_INFINITY;
    for (const owner of owners) {
      const last = this.lastWrites.get(owner.teamName, sessionId);
      // Near a budget, any change is due: the queue decides.
      if (!last || last.budget) return undefined;
      left = Math.min(left, last.at + this.ctx.options.eventCoalesceMs - now);
    }
    return left > 0 ? left : undefined;
  }

  /**
   * Write the run's share into the agent's heartbeat slot (one in-place write) under the agent's lock, when it
   * changed. A record that was resumed hands the session on: its successor (by `resumedBy`, a few hops at most) is the
   * one that counts now. Returns the agent as a view shows it (its `usage` the new count).
   */
  private async write(
    teamName: string,
    agentId: string,
    sessionId: string,
    sums: UsageSums,
    fromServer: boolean,
  ): Promise<{ state: AgentState; changed: boolean } | undefined> {
    const { store, clock } = this.ctx;
    let id: string | undefined = agentId;
    for (let hop = 0; id !== undefined && hop < 8; hop++) {
      const current: string = id;
      const outcome = await store.withAgentLock(teamName, current, async () => {
        const { agent: read, slot } = await store.readLiveness(teamName, current);
        if (read.kind !== "ok" || read.value.sessionId !== sessionId) return { done: undefined };
        const agent = read.value;
        if (agent.resumedBy) return { successor: agent.resumedBy };
        const run = runShare(sums, agent.usageBase);
        const counted = slot.record?.usage ?? agent.usage;
        // Another process that counted further (this one's events lag behind) is not undone; a count from the server
        // is the truth and replaces whatever is there.
        const stale = !fromServer && counted !== undefined && behind(run.totals, counted.totals);
        if (stale || sameSums(counted, run))
          return { done: { state: { ...agent, usage: counted }, changed: false } };
        const usage = { ...run, countedAt: isoNow(clock) };
        const record: HeartbeatRecord = slot.record ?? {
          version: 1,
          heartbeatTs: agent.heartbeatTs,
          source: agent.heartbeatSource ?? "spawn",
          updates: 0,
        };
        // Not flushed (as every heartbeat): a lost write is counted again from the server after a restart.
        store.writeHeartbeat(teamName, current, { ...record, usage });
        return { done: { state: { ...agent, usage }, changed: true } };
      });
      if ("done" in outcome) return outcome.done;
      id = outcome.successor;
    }
    return undefined;
  }
}

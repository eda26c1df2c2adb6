import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { mapLimit } from "../map-limit.ts";
import { ColorStore } from "./color-store.ts";
import { readSlot, writeSlot } from "./heartbeat-slot.ts";
import { HistoryStore } from "./history-store.ts";
import { type LockPlacement, type LockTiming, tryFileLock, withFileLock } from "./lock.ts";
import { tightenDir } from "./modes.ts";
import { NoticeDigestStore } from "./notice-digest-store.ts";
import { assertAgentId, isAgentId, type StoragePaths } from "./paths.ts";
import { type SalvagedAgent, salvageAgent } from "./salvage.ts";
import {
  type AgentState,
  AgentStateSchema,
  type HeartbeatRecord,
  type InboxMessage,
  InboxMessageSchema,
  type TaskBoard,
  TaskBoardSchema,
  type TeamConfig,
  TeamConfigSchema,
} from "./schemas.ts";
import { SendLogStore } from "./send-log-store.ts";
import { ServerInfoStore } from "./server-info-store.ts";
import { StatCache } from "./stat-cache.ts";
import {
  createJson,
  ensureStorageRoot,
  flushFile,
  listDir,
  parseJson,
  type ReadOptions,
  type ReadResult,
  readJson,
  type UpdateOutcome,
  updateJson,
  type WriteOptions,
  writeJson,
} from "./store.ts";
import { removeStrayTemps, STRAY_TEMP_AGE_MS } from "./stray-temps.ts";
import { newTaskSeries } from "./task-series.ts";

/** An agent's durable state together with its freshest liveness record. */
export interface AgentView {
  state: AgentState;
  heartbeat: HeartbeatRecord | undefined;
  /** The newer of the durable heartbeat and the slot's. */
  heartbeatTs: string;
}

/** An agent known only by its traces (see TeamStore.listUnreadableAgents). */
export interface UnreadableAgent {
  agentId: string;
  /** The newest damaged copy moved aside, and what was wrong with it; absent when none is left. */
  movedTo?: string;
  problem?: string;
  salvaged: SalvagedAgent;
}

/**
 * An inbox message and the file it was listed from. Markings go to that file: its name need not match the content
 * (a file restored from a backup or copied by hand), and a path rebuilt from the content would find nothing.
 */
export type FiledMessage = InboxMessage & { file: string };

export interface Listed<T> {
  items: T[];
  warnings: string[];
}

export function effectiveHeartbeatTs(state: AgentState, heartbeat: HeartbeatRecord | undefined): string {
  if (!heartbeat) return state.heartbeatTs;
  return Date.parse(heartbeat.heartbeatTs) > Date.parse(state.heartbeatTs)
    ? heartbeat.heartbeatTs
    : state.heartbeatTs;
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Agents read, decided and written at once by a batch: enough to overlap the disk's latency, few enough for its queue. */
const BATCH_IO_CONCURRENCY = 32;

/** One agent's part in a batch: its new state (none: unchanged) and what the caller wants to know about it. */
export interface BatchChange<R> {
  next?: AgentState;
  result: R;
}

/** An agent file's read and its slot's, as one view (or the agent file's failure). */
function viewOf(state: ReadResult<AgentState>, heartbeat: { record?: HeartbeatRecord; warning?: string }) {
  if (state.kind !== "ok") return state;
  const usage = heartbeat.record?.usage;
  const view: AgentView = {
    // The slot holds the usage the event stream counts (specs/usage-and-budgets.md); a view shows it on the state.
    state: usage ? { ...state.value, usage } : state.value,
    heartbeat: heartbeat.record,
    heartbeatTs: effectiveHeartbeatTs(state.value, heartbeat.record),
  };
  return { kind: "ok" as const, value: view, warnings: heartbeat.warning ? [heartbeat.warning] : [] };
}

/**
 * Agents that left a trace in their team's agents directory (a damaged copy moved aside, a heartbeat slot) but have no
 * state file, from its listing: id -> its damaged copies, oldest first (the names sort by the time they were moved).
 */
function tracesWithoutFile(names: readonly string[]): ReadonlyMap<string, readonly string[]> {
  const present = new Set<string>();
  const traces = new Map<string, string[]>();
  const add = (agentId: string, copy?: string) => {
    const copies = traces.get(agentId) ?? [];
    if (copy) copies.push(copy);
    traces.set(agentId, copies);
  };
  for (const name of names) {
    if (name.endsWith(".json")) present.add(name.slice(0, -".json".length));
    else if (name.endsWith(".hb")) add(name.slice(0, -".hb".length));
    else {
      const at = name.indexOf(".json.corrupt-");
      if (at > 0) add(name.slice(0, at), name);
    }
  }
  for (const [agentId, copies] of traces) {
    if (present.has(agentId) || !isAgentId(agentId)) traces.delete(agentId);
    else copies.sort();
  }
  return traces;
}

/**
 * Whether `warning` already tells what the damage note `note` says: the note itself, or the same moved-aside copy (a
 * listing describes an unreadable agent in its own words, naming the copy its file was moved to).
 */
function tells(warning: string, note: string): boolean {
  if (warning.includes(note)) return true;
  const copy = / moved aside to (\S+)/.exec(note)?.[1];
  return copy !== undefined && warning.includes(copy);
}

/** Typed access to one project's team state. Every method validates names before touching a path. */
export class TeamStore {
  /** Listings only: single reads (under a lock, before a write) always go to the file. */
  private readonly listedAgents = new StatCache<ReadResult<AgentState>>();
  private readonly listedSlots = new StatCache<Awaited<ReturnType<TeamStore["readHeartbeat"]>>>();
  /** Per team agents directory: see listUnreadableAgents. */
  private readonly agentTraces = new StatCache<ReadonlyMap<string, readonly string[]>>();
  /** How many agent files each team had at its last listing (see listAgentViews). */
  private readonly listedCounts = new Map<string, number>();
  /**
   * Damage found by reads whose caller had no tool result to put it in (the sweep, the monitor, a slot read behind
   * an agent read), per team, until a listing hands it on (withDamageNotes). See specs/storage.md (Damaged files).
   */
  private readonly damageNotes = new Map<string, Set<string>>();

  /**
   * The project's other files, one store each (path, schema, lock, damage rule), here so that `ctx.store` stays the
   * one way into state.
   */
  readonly history: HistoryStore;
  readonly colors: ColorStore;
  readonly serverInfo: ServerInfoStore;
  readonly sendLog: SendLogStore;
  readonly noticeDigest: NoticeDigestStore;

  constructor(
    readonly paths: StoragePaths,
    readonly lockTiming: Partial<LockTiming> = {},
  ) {
    this.history = new HistoryStore(paths, lockTiming);
    this.colors = new ColorStore(paths, lockTiming);
    this.serverInfo = new ServerInfoStore(paths, lockTiming);
    this.sendLog = new SendLogStore(paths, lockTiming);
    this.noticeDigest = new NoticeDigestStore(paths, lockTiming, (teamName, warning) =>
      this.noted(teamName, { kind: "corrupt", warning }),
    );
  }

  async init(): Promise<void> {
    await ensureStorageRoot(this.paths.root);
  }

  /** Temporary files of writes and takeover guards moved aside whose process died, an hour old at `now`; how many went. */
  removeStrayTemps(now: number): Promise<number> {
    return removeStrayTemps(this.paths, now - STRAY_TEMP_AGE_MS);
  }

  /** Close a storage dir an older version left readable by others, without creating it. Whether it changed. */
  secureRoot(): Promise<boolean> {
    return tightenDir(this.paths.root);
  }

  /** Remember a damaged file's warning for the team's next listing; returns `read` unchanged. */
  private noted<T extends { kind: string; warning?: string }>(teamName: string, read: T): T {
    if (read.kind === "corrupt" && read.warning) {
      const notes = this.damageNotes.get(teamName) ?? new Set<string>();
      notes.add(read.warning);
      this.damageNotes.set(teamName, notes);
    }
    return read;
  }

  /**
   * `warnings` plus the team's damage found since the last listing and not already among them. Tool results that list
   * a team call this, so damage that a background read found and moved aside still reaches the user once.
   */
  withDamageNotes(teamName: string, warnings: readonly string[]): string[] {
    const notes = this.damageNotes.get(teamName);
    this.damageNotes.delete(teamName);
    const unseen = [...(notes ?? [])].filter((note) => !warnings.some((warning) => tells(warning, note)));
    return [...warnings, ...unseen];
  }

  // Teams

  async listTeamNames(): Promise<string[]> {
    const names = await listDir(this.paths.teamsDir);
    return names.filter((name) => /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(name)).sort();
  }

  /** What the team's directory holds (names only): create-team refuses a name that left state behind. */
  teamDirEntries(teamName: string): Promise<string[]> {
    return listDir(this.paths.teamDir(teamName));
  }

  readTeam(teamName: string) {
    return readJson(this.paths.teamConfig(teamName), TeamConfigSchema);
  }

  async createTeam(config: TeamConfig): Promise<"created" | "exists"> {
    await this.init();
    try {
      await createJson(this.paths.teamConfig(config.name), TeamConfigSchema, config);
      return "created";
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") return "exists";
      throw error;
    }
  }

  updateTeam(teamName: string, fn: (current: TeamConfig | undefined) => TeamConfig | undefined) {
    return updateJson(this.paths.teamConfig(teamName), TeamConfigSchema, fn, this.lockTiming);
  }

  // Agents

  async readAgent(
    teamName: string,
    agentId: string,
    options: ReadOptions = {},
  ): Promise<ReadResult<AgentState>> {
    return this.agentAt(teamName, this.paths.agentState(teamName, agentId), options);
  }

  private async agentAt(
    teamName: string,
    file: string,
    options: ReadOptions = {},
  ): Promise<ReadResult<AgentState>> {
    return this.noted(teamName, await readJson(file, AgentStateSchema, options));
  }

  /**
   * What a heartbeat reads under the agent's lock: the agent's file and its liveness slot, with blocking reads (see
   * ReadOptions): two small files just written, where two thread-pool round trips cost a heartbeat a quarter of its
   * time.
   */
  async readLiveness(teamName: string, agentId: string) {
    const agent = await this.readAgent(teamName, agentId, { blocking: true });
    const slot = await this.readHeartbeat(teamName, agentId, { blocking: true });
    return { agent, slot };
  }

  /**
   * Replace an agent's file atomically. Durable (flushed before the rename) unless `durable: false`, which liveness
   * uses for what a power cut makes moot anyway: an active/idle flip, a waiting request, an error, misses reset.
   * Every agent process dies with the machine, and the sweep that follows judges them from the facts, so such a
   * write need not wait for the disk; an fsync waits for every program's dirty data and held the agent's lock for
   * up to 1.6 s while panes booted, stalling the spawn that waited for it. `blocking` (never durable) for the writes
   * of the hot critical sections under the agent's lock (see WriteOptions).
   */
  async writeAgent(state: AgentState, options: WriteOptions = {}): Promise<void> {
    await writeJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state, options);
  }

  /** Flush an agent's file to disk: a write made without fsync under its lock, made durable once the lock is free. */
  flushAgent(teamName: string, agentId: string): Promise<void> {
    return flushFile(this.paths.agentState(teamName, agentId));
  }

  /**
   * Write a new agent's first file (spawn, before its launch is done): an exclusive create, not flushed. The file is
   * flushed once the launch recorded the agent active, before the spawn returns. A power cut before that can lose the
   * file or leave it damaged (moved aside on the next read, like any damaged file); that spawn never finished either
   * way.
   */
  async createAgent(state: AgentState): Promise<void> {
    await createJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state, {
      durable: false,
    });
  }

  /** Remove an agent's state file and heartbeat slot (a spawn rolled back). */
  async removeAgentFiles(teamName: string, agentId: string): Promise<void> {
    await rm(this.paths.agentState(teamName, agentId), { force: true });
    await rm(this.paths.heartbeatSlot(teamName, agentId), { force: true });
  }

  /** Run `fn` holding the team's pane lock: panes opened at once into one window would fight over its layout. */
  withPaneLock<T>(teamName: string, fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.paneLock(teamName), fn, this.lockTiming);
  }

  /** Run `fn` holding the project's merge lock: one merge into the leader's checkout at a time. */
  withMergeLock<T>(fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.mergeLock, fn, this.lockTiming);
  }

  /**
   * The team's spare-worktree lock if nobody holds it, without waiting: its release function, or undefined while
   * another process makes the spare. Rejects with LockDirectoryMissingError when the team's directory is gone: a
   * spare maker still running must not bring a removed team back as an empty directory.
   */
  trySpareLock(teamName: string): Promise<(() => Promise<void>) | undefined> {
    return tryFileLock(this.paths.spareLock(teamName), this.lockTiming, { createDir: false });
  }

  /** Run `fn` holding one inbox message's lock: it is delivered by one process, once. */
  withInboxMessageLock<T>(message: { file: string }, fn: () => Promise<T>): Promise<T> {
    return withFileLock(message.file, fn, this.lockTiming);
  }

  /** Run `fn` holding the agent's lock: per-agent locks keep heartbeats of different agents from contending. */
  withAgentLock<T>(
    teamName: string,
    agentId: string,
    fn: () => Promise<T>,
    placement: LockPlacement = {},
  ): Promise<T> {
    return withFileLock(this.paths.agentState(teamName, agentId), fn, this.lockTiming, placement);
  }

  /**
   * Read-modify-write of one agent under its lock. `fn` sees the current state (undefined when missing or damaged)
   * and returns the new one, or undefined to leave it as it is.
   */
  updateAgent(
    teamName: string,
    agentId: string,
    fn: (current: AgentState | undefined) => AgentState | undefined,
  ): Promise<UpdateOutcome<AgentState>> {
    return this.withAgentLock(teamName, agentId, async () => {
      const read = await this.readAgent(teamName, agentId);
      const current = read.kind === "ok" ? read.value : undefined;
      const warnings = read.kind === "corrupt" ? [read.warning] : [];
      const next = fn(current);
      if (next === undefined) return { value: current, warnings };
      await this.writeAgent(next);
      return { value: next, warnings };
    });
  }

  /**
   * Change many agents of one team: `decide` runs for each agent holding that agent's lock, and a new state it returns
   * is written there and then (durably), so every agent file is the one truth about its agent. Agents are handled
   * `BATCH_IO_CONCURRENCY` at a time: a sweep that loses a hundred agents at once stays well under a second.
   * Results are in the order of `agentIds`.
   */
  updateAgents<R>(
    teamName: string,
    agentIds: readonly string[],
    decide: (agentId: string, current: AgentState | undefined) => Promise<BatchChange<R>>,
  ): Promise<R[]> {
    return mapLimit(agentIds, BATCH_IO_CONCURRENCY, (agentId) =>
      this.withAgentLock(teamName, agentId, async () => {
        const read = await this.readAgent(teamName, agentId);
        const change = await decide(agentId, read.kind === "ok" ? read.value : undefined);
        if (change.next && read.kind === "ok") await this.writeAgent(change.next);
        return change.result;
      }),
    );
  }

  async readHeartbeat(
    teamName: string,
    agentId: string,
    options: ReadOptions = {},
  ): Promise<{ record?: HeartbeatRecord; warning?: string }> {
    return this.slotOf(teamName, this.paths.heartbeatSlot(teamName, agentId), options);
  }

  private async slotOf(
    teamName: string,
    file: string,
    options: ReadOptions = {},
  ): Promise<{ record?: HeartbeatRecord; warning?: string }> {
    const slot = this.noted(teamName, await readSlot(file, options));
    if (slot.kind === "ok") return { record: slot.record };
    if (slot.kind === "corrupt") return { warning: slot.warning };
    return {};
  }

  writeHeartbeat(teamName: string, agentId: string, record: HeartbeatRecord): void {
    writeSlot(this.paths.heartbeatSlot(teamName, agentId), record);
  }

  async readAgentView(teamName: string, agentId: string) {
    const [view] = await this.readAgentViews(teamName, [agentId]);
    return view as NonNullable<typeof view>;
  }

  /** Views of the given agents, read afresh (no cache), in the order of `agentIds`. */
  readAgentViews(teamName: string, agentIds: readonly string[]) {
    // The team's directory once, not twice per agent (see StoragePaths.agentFilesOf); every id is still checked.
    const filesOf = this.paths.agentFilesOf(teamName);
    return Promise.all(
      agentIds.map(async (agentId) => {
        assertAgentId(agentId);
        const files = filesOf(agentId);
        const [state, heartbeat] = await Promise.all([
          this.agentAt(teamName, files.state),
          this.slotOf(teamName, files.slot),
        ]);
        return viewOf(state, heartbeat);
      }),
    );
  }

  /** Ids of the team's agent files (a directory listing; nothing is read). */
  async listAgentIds(teamName: string): Promise<string[]> {
    return (await listDir(this.paths.agentsDir(teamName)))
      .filter((file) => file.endsWith(".json"))
      .map((file) => file.slice(0, -".json".length))
      .filter(isAgentId);
  }

  /**
   * Agents whose state file is gone while traces of them remain: a damaged copy moved aside, or a heartbeat slot. Such
   * an agent may still run (its pane, session, tasks and color held), so callers show it rather than forget it. What
   * the newest damaged copy still says is salvaged; its problem is described again on every call, the file being
   * moved aside only once.
   */
  async listUnreadableAgents(teamName: string): Promise<UnreadableAgent[]> {
    const dir = this.paths.agentsDir(teamName);
    // Cached by the directory's stat, which changes whenever a file in it comes or goes: listings stay one stat dearer.
    const traces = await this.agentTraces.get(dir, async () => tracesWithoutFile(await listDir(dir)));
    return Promise.all(
      [...traces].map(async ([agentId, copies]) => {
        const newest = copies.at(-1);
        if (!newest) return { agentId, salvaged: {} };
        const movedTo = path.join(dir, newest);
        const text = await readFile(movedTo, "utf8").catch(() => "");
        const parsed = parseJson(text, AgentStateSchema);
        const problem = parsed.ok ? "unreadable when it was moved aside" : parsed.problem;
        return { agentId, movedTo, problem, salvaged: salvageAgent(text) };
      }),
    );
  }

  /** Every readable agent of one team; damaged files are moved aside (listUnreadableAgents shows their agents). */
  async listAgentViews(teamName: string): Promise<Listed<AgentView>> {
    const ids = await this.listAgentIds(teamName);
    const filesOf = this.paths.agentFilesOf(teamName);
    const warnings: string[] = [];
    const items: AgentView[] = [];
    const seen = new Set<string>();
    await Promise.all(
      ids.map(async (agentId) => {
        const { state: stateFile, slot: slotFile } = filesOf(agentId);
        seen.add(stateFile).add(slotFile);
        // Both at once: listing 1000 agents is 2000 small reads, and waiting for each pair in turn doubles the latency.
        const [state, heartbeat] = await Promise.all([
          this.listedAgents.get(stateFile, () => this.readAgent(teamName, agentId)),
          this.listedSlots.get(slotFile, () => this.readHeartbeat(teamName, agentId)),
        ]);
        const read = viewOf(state, heartbeat);
        if (read.kind === "ok") {
          items.push(read.value);
          warnings.push(...read.warnings);
        }
        // A damaged file is moved aside here, silently: listUnreadableAgents reports that agent on every listing.
      }),
    );
    // Files only go away when agents do: while the team's count is unchanged, the caches hold nothing to drop (an
    // agent replaced by another between two listings leaves one entry behind until the count changes; a stale entry
    // is never used, the file's stat is checked first).
    if (this.listedCounts.get(teamName) !== ids.length) {
      this.forgetOthers(teamName, seen);
      this.listedCounts.set(teamName, ids.length);
    }
    // Plain code-unit order: ISO timestamps sort as text, and localeCompare cost a seventh of a 1000-agent listing.
    items.sort((a, b) => byText(a.state.createdAt, b.state.createdAt) || byText(a.state.name, b.state.name));
    return { items, warnings };
  }

  /** Drop cached files of `teamName` that no longer exist; other teams' entries are left alone. */
  private forgetOthers(teamName: string, seen: ReadonlySet<string>): void {
    const prefix = `${this.paths.agentsDir(teamName)}${path.sep}`;
    for (const cache of [this.listedAgents, this.listedSlots]) {
      cache.retain((file) => !file.startsWith(prefix) || seen.has(file));
    }
  }

  // Tasks

  readTasks(teamName: string) {
    return readJson(this.paths.tasks(teamName), TaskBoardSchema);
  }

  /** The board a new team starts with (create-team): the only board whose ids carry no series. */
  async createTasks(teamName: string): Promise<void> {
    await createJson(this.paths.tasks(teamName), TaskBoardSchema, { version: 1, nextId: 1, tasks: [] });
  }

  /**
   * Read-modify-write of the board under its lock. A board that is missing or damaged was lost (create-team writes
   * the first one): its successor starts a new series, so no id of the lost board is ever issued again.
   */
  updateTasks(
    teamName: string,
    fn: (board: TaskBoard) => TaskBoard | undefined | Promise<TaskBoard | undefined>,
  ) {
    return updateJson(
      this.paths.tasks(teamName),
      TaskBoardSchema,
      (current) => fn(current ?? { version: 1, nextId: 1, series: newTaskSeries(), tasks: [] }),
      this.lockTiming,
    );
  }

  // Inbox: one file per message, so delivering never rewrites (or contends on) earlier messages.

  async appendInbox(message: Omit<InboxMessage, "version" | "id">): Promise<FiledMessage> {
    const full: InboxMessage = { version: 1, id: uuidv4(), ...message };
    const file = this.inboxMessageFile(full);
    await createJson(file, InboxMessageSchema, full);
    return { ...full, file };
  }

  /** Where one inbox message lives: named by creation time, so a directory listing sorts oldest first. */
  inboxMessageFile(message: Pick<InboxMessage, "teamName" | "to" | "createdAt" | "id">): string {
    const stamp = message.createdAt.replace(/[:.]/g, "-");
    return path.join(this.paths.inboxDir(message.teamName, message.to), `${stamp}-${message.id}.json`);
  }

  /** Not flushed: after a power cut that lost it the session is not checked, but the server lost its recent state too. */
  async markInboxAttempted(message: FiledMessage, attemptedAt: string): Promise<FiledMessage> {
    const attempted = { ...message, attemptedAt };
    await writeJson(message.file, InboxMessageSchema, attempted, { durable: false });
    return attempted;
  }

  async markInboxDelivered(message: FiledMessage, deliveredAt: string): Promise<void> {
    await writeJson(message.file, InboxMessageSchema, { ...message, deliveredAt });
  }

  /**
   * Write `change` into each message's file, under its lock and re-read first, so two markings of one message at the
   * same time (a delivery and a read) never undo each other. `unlessSet`: a file that has this field keeps its value.
   */
  async markInboxMessages(
    messages: readonly FiledMessage[],
    change: Partial<InboxMessage>,
    options: { unlessSet?: "readAt" | "attemptedAt" | "deliveredAt"; durable?: boolean } = {},
  ): Promise<void> {
    await mapLimit(messages, 8, ({ file }) =>
      withFileLock(
        file,
        async () => {
          const current = await readJson(file, InboxMessageSchema);
          if (current.kind !== "ok" || (options.unlessSet && current.value[options.unlessSet])) return;
          const durable = options.durable ?? true;
          await writeJson(file, InboxMessageSchema, { ...current.value, ...change }, { durable });
        },
        this.lockTiming,
      ),
    );
  }

  /** One inbox message; a damaged one is moved aside, reported and noted for the team's next listing. */
  async readInboxMessage(teamName: string, file: string): Promise<ReadResult<InboxMessage>> {
    return this.noted(teamName, await readJson(file, InboxMessageSchema));
  }

  /** Agents that have an inbox directory (one listing of the team's inbox folder; nothing is read). */
  async inboxOwners(teamName: string): Promise<Set<string>> {
    return new Set(await listDir(this.paths.inboxesDir(teamName)));
  }

  /** The message files of one inbox, oldest first (nothing is read). */
  async inboxFiles(teamName: string, agentId: string): Promise<string[]> {
    const dir = this.paths.inboxDir(teamName, agentId);
    const names = (await listDir(dir)).filter((file) => file.endsWith(".json")).sort();
    return names.map((name) => path.join(dir, name));
  }

  async readInbox(teamName: string, agentId: string): Promise<Listed<FiledMessage>> {
    const items: FiledMessage[] = [];
    const warnings: string[] = [];
    for (const file of await this.inboxFiles(teamName, agentId)) {
      const read = await this.readInboxMessage(teamName, file);
      if (read.kind === "ok") items.push({ ...read.value, file });
      else if (read.kind === "corrupt") warnings.push(`inbox message ${read.warning}`);
    }
    return { items, warnings };
  }
}

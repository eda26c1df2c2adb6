import { createHash } from "node:crypto";
import { unlink } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { mapLimit } from "../map-limit.ts";
import { readSlot, writeSlot } from "./heartbeat-slot.ts";
import type { LockTiming } from "./lock.ts";
import { isLocked, waitUntilUnlocked, withFileLock } from "./lock.ts";
import { tightenDir } from "./modes.ts";
import { isAgentId, type StoragePaths } from "./paths.ts";
import {
  type AgentJournal,
  AgentJournalSchema,
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
import { StatCache } from "./stat-cache.ts";
import {
  createJson,
  ensureStorageRoot,
  listDir,
  type ReadResult,
  readJson,
  type UpdateOutcome,
  updateJson,
  writeJson,
} from "./store.ts";

/** An agent's durable state together with its freshest liveness record. */
export interface AgentView {
  state: AgentState;
  heartbeat: HeartbeatRecord | undefined;
  /** The newer of the durable heartbeat and the slot's. */
  heartbeatTs: string;
}

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

const EMPTY_JOURNAL: AgentJournal = { version: 1, entries: {} };
/** Agent files read or written at once by a batch: enough to overlap the disk's latency, few enough for its queue. */
const BATCH_IO_CONCURRENCY = 32;

const fingerprints = new WeakMap<AgentState, string>();

/** Identifies one version of an agent file (as parsed): a journal entry holds only over the version it was made from. */
function fingerprint(state: AgentState): string {
  let known = fingerprints.get(state);
  if (known === undefined) {
    known = createHash("sha1").update(JSON.stringify(state)).digest("hex");
    fingerprints.set(state, known);
  }
  return known;
}

/** The agent as its file says, or as the journal says when the journal's entry was made from this very file. */
function throughJournal(read: ReadResult<AgentState>, journal: AgentJournal, agentId: string) {
  if (read.kind !== "ok") return read;
  const entry = journal.entries[agentId];
  if (!entry || entry.base !== fingerprint(read.value)) return read;
  return { kind: "ok" as const, value: entry.state };
}

/** One agent's part in a batch: its new state (none: unchanged) and what the caller wants to know about it. */
export interface BatchChange<R> {
  next?: AgentState;
  result: R;
}

/** An agent file's read and its slot's, as one view (or the agent file's failure). */
function viewOf(state: ReadResult<AgentState>, heartbeat: { record?: HeartbeatRecord; warning?: string }) {
  if (state.kind !== "ok") return state;
  const view: AgentView = {
    state: state.value,
    heartbeat: heartbeat.record,
    heartbeatTs: effectiveHeartbeatTs(state.value, heartbeat.record),
  };
  return { kind: "ok" as const, value: view, warnings: heartbeat.warning ? [heartbeat.warning] : [] };
}

/** Typed access to one project's team state. Every method validates names before touching a path. */
export class TeamStore {
  /** Listings only: single reads (under a lock, before a write) always go to the file. */
  private readonly listedAgents = new StatCache<ReadResult<AgentState>>();
  private readonly listedSlots = new StatCache<Awaited<ReturnType<TeamStore["readHeartbeat"]>>>();
  private readonly journals = new StatCache<AgentJournal>();
  /** How many agent files each team had at its last listing (see listAgentViews). */
  private readonly listedCounts = new Map<string, number>();
  /**
   * Damage found by reads whose caller had no tool result to put it in (the sweep, the monitor, a journal read behind
   * an agent read), per team, until a listing hands it on (withDamageNotes). See specs/storage.md (Damaged files).
   */
  private readonly damageNotes = new Map<string, Set<string>>();

  constructor(
    readonly paths: StoragePaths,
    readonly lockTiming: Partial<LockTiming> = {},
  ) {}

  async init(): Promise<void> {
    await ensureStorageRoot(this.paths.root);
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
    const unseen = [...(notes ?? [])].filter((note) => !warnings.some((warning) => warning.includes(note)));
    return [...warnings, ...unseen];
  }

  // Teams

  async listTeamNames(): Promise<string[]> {
    const names = await listDir(this.paths.teamsDir);
    return names.filter((name) => /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(name)).sort();
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

  /** The agent file alone, as on disk (journal entries not applied). */
  private async readAgentFile(teamName: string, agentId: string) {
    return this.noted(teamName, await readJson(this.paths.agentState(teamName, agentId), AgentStateSchema));
  }

  /**
   * The team's agent journal. Cached by stat: it is only ever replaced whole (a new inode) and the cache trusts no
   * file younger than its settle time, so a stat check is enough even for reads under a lock. A damaged journal is
   * moved aside and read as empty (the sweep finds the agents it held stale again), and noted for the next listing.
   */
  private readJournal(teamName: string): Promise<AgentJournal> {
    return this.journals.get(this.paths.agentJournal(teamName), () => this.readJournalFile(teamName));
  }

  private async readJournalFile(teamName: string): Promise<AgentJournal> {
    const read = this.noted(teamName, await readJson(this.paths.agentJournal(teamName), AgentJournalSchema));
    return read.kind === "ok" ? read.value : EMPTY_JOURNAL;
  }

  async readAgent(teamName: string, agentId: string): Promise<ReadResult<AgentState>> {
    const [read, journal] = await Promise.all([
      this.readAgentFile(teamName, agentId),
      this.readJournal(teamName),
    ]);
    return throughJournal(read, journal, agentId);
  }

  async writeAgent(state: AgentState): Promise<void> {
    await writeJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state);
  }

  /**
   * Write a new agent's first file (spawn, before its launch is done): an exclusive create, not flushed. The launch's
   * next write (the agent becoming active) is the durable one. A power cut before it can lose the file or leave it
   * damaged (moved aside on the next read, like any damaged file); that spawn never finished either way.
   */
  async createAgent(state: AgentState): Promise<void> {
    await createJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state, {
      durable: false,
    });
  }

  /**
   * Run `fn` holding the agent's lock: per-agent locks keep heartbeats of different agents from contending. While a
   * batch holds the team's agent journal, it stands for the locks of all the team's agents: the agent lock waits.
   */
  withAgentLock<T>(teamName: string, agentId: string, fn: () => Promise<T>): Promise<T> {
    const journal = this.paths.agentJournal(teamName);
    return withFileLock(
      this.paths.agentState(teamName, agentId),
      fn,
      this.lockTiming,
      async () => !(await isLocked(journal, this.lockTiming)),
    );
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
   * Change many agents of one team in one durable write: `decide` runs for each agent while no one else holds its
   * lock, and the new states go to the team's agent journal together, so a thousand transitions cost one fsync'd
   * file instead of a thousand (a replaced file costs ~1.5 ms here). Readers see them at once through the journal; a
   * later `foldAgentJournal` writes them into the agent files. Results are in the order of `agentIds`.
   */
  updateAgents<R>(
    teamName: string,
    agentIds: readonly string[],
    decide: (agentId: string, current: AgentState | undefined) => Promise<BatchChange<R>>,
  ): Promise<R[]> {
    if (agentIds.length === 0) return Promise.resolve([]);
    return this.withJournalLock(teamName, agentIds, async (journal) => {
      const changed: AgentJournal["entries"] = {};
      const results = await mapLimit(agentIds, BATCH_IO_CONCURRENCY, async (agentId) => {
        const read = await this.readAgentFile(teamName, agentId);
        const current = throughJournal(read, journal, agentId);
        const change = await decide(agentId, current.kind === "ok" ? current.value : undefined);
        if (change.next && read.kind === "ok")
          changed[agentId] = { base: fingerprint(read.value), state: change.next };
        return change.result;
      });
      if (Object.keys(changed).length > 0) {
        await this.writeJournal(teamName, { version: 1, entries: { ...journal.entries, ...changed } });
      }
      return results;
    });
  }

  /**
   * Write up to `limit` journal entries into their agent files (durably) and drop them from the journal; entries a
   * later write of the agent file made obsolete are dropped unwritten. Returns how many entries it dropped.
   */
  async foldAgentJournal(teamName: string, limit: number): Promise<number> {
    const ids = Object.keys((await this.readJournal(teamName)).entries).slice(0, limit);
    if (ids.length === 0) return 0;
    // Each agent under its own lock, so heartbeats of the team's other agents go on meanwhile. Holding it, the
    // agent's entry cannot change: a batch needs this lock too.
    await mapLimit(ids, BATCH_IO_CONCURRENCY, (agentId) =>
      this.withAgentLock(teamName, agentId, async () => {
        const [read, journal] = await Promise.all([
          this.readAgentFile(teamName, agentId),
          this.readJournal(teamName),
        ]);
        const entry = journal.entries[agentId];
        if (entry && read.kind === "ok" && fingerprint(read.value) === entry.base)
          await this.writeAgent(entry.state);
      }),
    );
    // An entry whose agent file moved on never holds again, so dropping it needs no agent lock. (Agent locks wait
    // for the few ms this holds the journal's lock.)
    return withFileLock(
      this.paths.agentJournal(teamName),
      async () => {
        const entries = { ...(await this.readJournalFile(teamName)).entries };
        let dropped = 0;
        await mapLimit(ids, BATCH_IO_CONCURRENCY, async (agentId) => {
          const entry = entries[agentId];
          if (!entry) return;
          const read = await this.readAgentFile(teamName, agentId);
          // Kept only while it still holds and says something the file does not (a no-op entry folds to itself).
          const onDisk = read.kind === "ok" ? fingerprint(read.value) : undefined;
          if (onDisk === entry.base && onDisk !== fingerprint(entry.state)) return;
          delete entries[agentId];
          dropped++;
        });
        if (dropped > 0) await this.writeJournal(teamName, { version: 1, entries });
        return dropped;
      },
      this.lockTiming,
    );
  }

  /**
   * Run `fn` over the current journal holding its lock, which stands for the locks of all the team's agents: new agent
   * lockers wait while it is held (withAgentLock), and `fn` starts once the holders of `agentIds`' locks are done.
   */
  private withJournalLock<T>(
    teamName: string,
    agentIds: readonly string[],
    fn: (journal: AgentJournal) => Promise<T>,
  ): Promise<T> {
    return withFileLock(
      this.paths.agentJournal(teamName),
      async () => {
        await waitUntilUnlocked(
          agentIds.map((agentId) => this.paths.agentState(teamName, agentId)),
          this.lockTiming,
        );
        return fn(await this.readJournalFile(teamName));
      },
      this.lockTiming,
    );
  }

  private async writeJournal(teamName: string, journal: AgentJournal): Promise<void> {
    const file = this.paths.agentJournal(teamName);
    if (Object.keys(journal.entries).length > 0) await writeJson(file, AgentJournalSchema, journal);
    else await unlink(file).catch(() => {});
  }

  async readHeartbeat(
    teamName: string,
    agentId: string,
  ): Promise<{ record?: HeartbeatRecord; warning?: string }> {
    const slot = this.noted(teamName, await readSlot(this.paths.heartbeatSlot(teamName, agentId)));
    if (slot.kind === "ok") return { record: slot.record };
    if (slot.kind === "corrupt") return { warning: slot.warning };
    return {};
  }

  writeHeartbeat(teamName: string, agentId: string, record: HeartbeatRecord): Promise<void> {
    return writeSlot(this.paths.heartbeatSlot(teamName, agentId), record);
  }

  async readAgentView(teamName: string, agentId: string) {
    const [view] = await this.readAgentViews(teamName, [agentId]);
    return view as NonNullable<typeof view>;
  }

  /** Views of the given agents, read afresh (no cache), in the order of `agentIds`; the journal is read once. */
  async readAgentViews(teamName: string, agentIds: readonly string[]) {
    const journal = await this.readJournal(teamName);
    return Promise.all(
      agentIds.map(async (agentId) => {
        const [state, heartbeat] = await Promise.all([
          this.readAgentFile(teamName, agentId),
          this.readHeartbeat(teamName, agentId),
        ]);
        return viewOf(throughJournal(state, journal, agentId), heartbeat);
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

  /** Every agent of one team; damaged files are moved aside and reported, the rest still listed. */
  async listAgentViews(teamName: string): Promise<Listed<AgentView>> {
    const [ids, journal] = await Promise.all([this.listAgentIds(teamName), this.readJournal(teamName)]);
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
          this.listedAgents.get(stateFile, () => this.readAgentFile(teamName, agentId)),
          this.listedSlots.get(slotFile, () => this.readHeartbeat(teamName, agentId)),
        ]);
        const read = viewOf(throughJournal(state, journal, agentId), heartbeat);
        if (read.kind === "ok") {
          items.push(read.value);
          warnings.push(...read.warnings);
        } else if (read.kind === "corrupt") {
          warnings.push(`Skipped agent ${agentId}: ${read.warning}. Re-spawn it if it is still needed.`);
        }
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

  updateTasks(teamName: string, fn: (board: TaskBoard) => TaskBoard | undefined) {
    return updateJson(
      this.paths.tasks(teamName),
      TaskBoardSchema,
      (current) => fn(current ?? { version: 1, nextId: 1, tasks: [] }),
      this.lockTiming,
    );
  }

  // Inbox: one file per message, so delivering never rewrites (or contends on) earlier messages.

  async appendInbox(message: Omit<InboxMessage, "version" | "id">): Promise<InboxMessage> {
    const full: InboxMessage = { version: 1, id: uuidv4(), ...message };
    await createJson(this.inboxMessageFile(full), InboxMessageSchema, full);
    return full;
  }

  /** Where one inbox message lives: named by creation time, so a directory listing sorts oldest first. */
  inboxMessageFile(message: Pick<InboxMessage, "teamName" | "to" | "createdAt" | "id">): string {
    const stamp = message.createdAt.replace(/[:.]/g, "-");
    return path.join(this.paths.inboxDir(message.teamName, message.to), `${stamp}-${message.id}.json`);
  }

  async markInboxDelivered(message: InboxMessage, deliveredAt: string): Promise<void> {
    await writeJson(this.inboxMessageFile(message), InboxMessageSchema, { ...message, deliveredAt });
  }

  /** One inbox message; a damaged one is moved aside, reported and noted for the team's next listing. */
  async readInboxMessage(teamName: string, file: string): Promise<ReadResult<InboxMessage>> {
    return this.noted(teamName, await readJson(file, InboxMessageSchema));
  }

  async readInbox(teamName: string, agentId: string): Promise<Listed<InboxMessage>> {
    const dir = this.paths.inboxDir(teamName, agentId);
    const files = (await listDir(dir)).filter((file) => file.endsWith(".json")).sort();
    const items: InboxMessage[] = [];
    const warnings: string[] = [];
    for (const file of files) {
      const read = await this.readInboxMessage(teamName, path.join(dir, file));
      if (read.kind === "ok") items.push(read.value);
      else if (read.kind === "corrupt") warnings.push(`inbox message ${read.warning}`);
    }
    return { items, warnings };
  }
}

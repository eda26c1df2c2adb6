import { v4 as uuidv4 } from "uuid";
import { AgentFiles, type BatchChange } from "./agent-files.ts";
import { AgentListing, type UnreadableAgent } from "./agent-listing.ts";
import type { AgentView } from "./agent-view.ts";
import { ColorStore } from "./color-store.ts";
import { DamageNotes } from "./damage-notes.ts";
import { HistoryStore } from "./history-store.ts";
import type { FiledMessage } from "./inbox-files.ts";
import * as inbox from "./inbox-files.ts";
import type { Listed } from "./listed.ts";
import { type LockPlacement, type LockTiming, tryFileLock, withFileLock } from "./lock.ts";
import { tightenDir } from "./modes.ts";
import { NoticeDigestStore } from "./notice-digest-store.ts";
import type { StoragePaths } from "./paths.ts";
import {
  type AgentState,
  type HeartbeatRecord,
  type InboxMessage,
  InboxMessageSchema,
  type TaskBoard,
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
  type ReadOptions,
  type ReadResult,
  readJson,
  type UpdateOutcome,
  updateJson,
  type WriteOptions,
  writeJson,
} from "./store.ts";
import { removeStrayTemps, STRAY_TEMP_AGE_MS } from "./stray-temps.ts";
import { TaskBoardStore } from "./task-board-store.ts";

/** How long a worktree change waits for another process's (see TeamStore.withWorktreeChangeLock). */
const WORKTREE_CHANGE_WAIT_MS = 120_000;

/** Typed access to one project's team state. Every method validates names before touching a path. */
export class TeamStore {
  /** Damage found by reads whose caller had no tool result to put it in (see damage-notes.ts). */
  private readonly damage = new DamageNotes();
  /** One agent's files (see agent-files.ts) and the team's listings of them (agent-listing.ts). */
  private readonly agents: AgentFiles;
  private readonly listing: AgentListing;
  /** Team configs read before, trusted while their file is unchanged (see readTeam). */
  private readonly configs = new StatCache<ReadResult<TeamConfig>>();
  /** The task board's files (see readTasks). */
  private readonly tasks: TaskBoardStore;

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
    this.agents = new AgentFiles(paths, lockTiming, this.damage);
    this.listing = new AgentListing(paths, this.agents);
    this.tasks = new TaskBoardStore(paths, lockTiming, this.damage);
    this.history = new HistoryStore(paths, lockTiming);
    this.colors = new ColorStore(paths, lockTiming);
    this.serverInfo = new ServerInfoStore(paths, lockTiming);
    this.sendLog = new SendLogStore(paths, lockTiming);
    this.noticeDigest = new NoticeDigestStore(paths, lockTiming, (teamName, warning) =>
      this.damage.noted(teamName, { kind: "corrupt", warning }),
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

  /**
   * `warnings` plus the team's damage found since the last listing and not already among them. Tool results that list
   * a team call this, so damage that a background read found and moved aside still reaches the user once.
   */
  withDamageNotes(teamName: string, warnings: readonly string[]): string[] {
    return this.damage.handOn(teamName, warnings);
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

  /** The team's config, read and validated only when its stat changed (every team tool call reads it first). */
  readTeam(teamName: string): Promise<ReadResult<TeamConfig>> {
    const file = this.paths.teamConfig(teamName);
    return this.configs.get(file, () => readJson(file, TeamConfigSchema));
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

  /** Read-modify-write of the team's config under its lock; durable unless `options` say otherwise (see WriteOptions). */
  updateTeam(
    teamName: string,
    fn: (current: TeamConfig | undefined) => TeamConfig | undefined,
    options: WriteOptions = {},
  ) {
    return updateJson(this.paths.teamConfig(teamName), TeamConfigSchema, fn, this.lockTiming, options);
  }

  /** Flush the team's config to disk: a write made without fsync under its lock (a spawn's member), made durable later. */
  flushTeam(teamName: string): Promise<void> {
    return flushFile(this.paths.teamConfig(teamName));
  }

  // Agents: one agent's files (agent-files.ts, where each method's rules are told) and the team's listings of them
  // (agent-listing.ts).

  readAgent(teamName: string, agentId: string, options: ReadOptions = {}): Promise<ReadResult<AgentState>> {
    return this.agents.read(teamName, agentId, options);
  }

  /** The agent's file and its liveness slot, read blocking under the agent's lock by a heartbeat. */
  readLiveness(teamName: string, agentId: string) {
    return this.agents.readLiveness(teamName, agentId);
  }

  /** Replace an agent's file atomically; durable unless `durable: false` (liveness only). */
  writeAgent(state: AgentState, options: WriteOptions = {}): Promise<void> {
    return this.agents.write(state, options);
  }

  /** Flush an agent's file to disk: a write made without fsync under its lock, made durable once the lock is free. */
  flushAgent(teamName: string, agentId: string): Promise<void> {
    return this.agents.flush(teamName, agentId);
  }

  /** Write a new agent's first file (spawn, before its launch is done): an exclusive create, not flushed. */
  createAgent(state: AgentState): Promise<void> {
    return this.agents.create(state);
  }

  /** Remove an agent's state file and heartbeat slot (a spawn rolled back). */
  removeAgentFiles(teamName: string, agentId: string): Promise<void> {
    return this.agents.remove(teamName, agentId);
  }

  /** Run `fn` holding the agent's lock. */
  withAgentLock<T>(
    teamName: string,
    agentId: string,
    fn: () => Promise<T>,
    placement: LockPlacement = {},
  ): Promise<T> {
    return this.agents.withLock(teamName, agentId, fn, placement);
  }

  /** Read-modify-write of one agent under its lock. */
  updateAgent(
    teamName: string,
    agentId: string,
    fn: (current: AgentState | undefined) => AgentState | undefined,
  ): Promise<UpdateOutcome<AgentState>> {
    return this.agents.update(teamName, agentId, fn);
  }

  /** Change many agents of one team, each decided and written under its own lock; results in `agentIds` order. */
  updateAgents<R>(
    teamName: string,
    agentIds: readonly string[],
    decide: (agentId: string, current: AgentState | undefined) => Promise<BatchChange<R>>,
  ): Promise<R[]> {
    return this.agents.updateMany(teamName, agentIds, decide);
  }

  readHeartbeat(teamName: string, agentId: string, options: ReadOptions = {}) {
    return this.agents.readHeartbeat(teamName, agentId, options);
  }

  writeHeartbeat(teamName: string, agentId: string, record: HeartbeatRecord): void {
    this.agents.writeHeartbeat(teamName, agentId, record);
  }

  async readAgentView(teamName: string, agentId: string) {
    const [view] = await this.readAgentViews(teamName, [agentId]);
    return view as NonNullable<typeof view>;
  }

  /** Views of the given agents, read afresh (no cache), in the order of `agentIds`. */
  readAgentViews(teamName: string, agentIds: readonly string[]) {
    return this.agents.readViews(teamName, agentIds);
  }

  /** Ids of the team's agent files (a directory listing; nothing is read). */
  listAgentIds(teamName: string): Promise<string[]> {
    return this.listing.ids(teamName);
  }

  /** Agents whose state file is gone while traces of them remain: shown, not forgotten. */
  listUnreadableAgents(teamName: string): Promise<UnreadableAgent[]> {
    return this.listing.unreadable(teamName);
  }

  /** Every readable agent of one team; damaged files are moved aside (listUnreadableAgents shows their agents). */
  listAgentViews(teamName: string): Promise<Listed<AgentView>> {
    return this.listing.views(teamName);
  }

  // Locks of what is not one file's read-modify-write

  /** Run `fn` holding the team's pane lock: panes opened at once into one window would fight over its layout. */
  withPaneLock<T>(teamName: string, fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.paneLock(teamName), fn, this.lockTiming);
  }

  /**
   * Run `fn` (a `git worktree` change) holding the project's worktree-change lock. Waits up to two minutes: a
   * checkout of a large repository for another agent may be under way.
   */
  withWorktreeChangeLock<T>(fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.worktreeChangeLock, fn, {
      ...this.lockTiming,
      maxWaitMs: Math.max(this.lockTiming.maxWaitMs ?? 0, WORKTREE_CHANGE_WAIT_MS),
    });
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
    return withFileLock(inbox.pendingPathOf(message.file), fn, this.lockTiming);
  }

  // Tasks: the board and its journal of status changes (task-board-store.ts, task-journal.ts).

  /**
   * The board as on disk (its journal replayed), read, parsed and validated only when a stat of its files changed:
   * list-tasks and `status` of a board of a thousand tasks then cost two stats. Callers never change the board they
   * get, and get the same object while the board is unchanged.
   */
  readTasks(teamName: string): Promise<ReadResult<TaskBoard>> {
    return this.tasks.read(teamName);
  }

  /** The board a new team starts with (create-team): the only board whose ids carry no series. */
  createTasks(teamName: string): Promise<void> {
    return this.tasks.create(teamName);
  }

  /**
   * Read-modify-write of the board under its lock; a change of status fields only is appended to the board's journal
   * (see TaskBoardStore.update). A board that is missing or damaged was lost (create-team writes the first one): its
   * successor starts a new series, so no id of the lost board is ever issued again.
   */
  updateTasks(
    teamName: string,
    fn: (board: TaskBoard) => TaskBoard | undefined | Promise<TaskBoard | undefined>,
  ): Promise<UpdateOutcome<TaskBoard>> {
    return this.tasks.update(teamName, fn);
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
    return inbox.messagePath(this.paths.inboxDir(message.teamName, message.to), message);
  }

  /** Not flushed: after a power cut that lost it the session is not checked, but the server lost its recent state too. */
  async markInboxAttempted(message: FiledMessage, attemptedAt: string): Promise<FiledMessage> {
    const attempted = { ...message, attemptedAt };
    await writeJson(message.file, InboxMessageSchema, attempted, { durable: false });
    return attempted;
  }

  /** Under the message's lock: marked, then moved into `delivered/`. */
  markInboxDelivered(message: FiledMessage, deliveredAt: string): Promise<void> {
    return inbox.markDelivered(message, deliveredAt);
  }

  /** Write `change` into each message's file under its lock, re-read first (see markInboxFiles). */
  markInboxMessages(
    messages: readonly FiledMessage[],
    change: Partial<InboxMessage>,
    opts: inbox.MarkOptions = {},
  ) {
    return inbox.markInboxFiles(messages, change, opts, this.lockTiming);
  }

  /** Delete messages that reached their recipient (the inbox bound, see removeInboxFiles). */
  removeInboxMessages(messages: readonly { file: string }[]): Promise<void> {
    return inbox.removeInboxFiles(messages.map((message) => message.file));
  }

  /** One inbox message; a damaged or oversized one is moved aside, reported and noted for the team's next listing. */
  async readInboxMessage(teamName: string, file: string): Promise<ReadResult<InboxMessage>> {
    return this.damage.noted(teamName, await inbox.readInboxFile(file));
  }

  /** Agents that have an inbox directory (one listing of the team's inbox folder; nothing is read). */
  async inboxOwners(teamName: string): Promise<Set<string>> {
    return new Set(await listDir(this.paths.inboxesDir(teamName)));
  }

  /** The files of one inbox's pending messages (reached no one yet), oldest first (nothing is read; inbox-files.ts). */
  inboxFiles(teamName: string, agentId: string): Promise<string[]> {
    return inbox.messageFiles(this.paths.inboxDir(teamName, agentId));
  }

  /** The files of one inbox's delivered or read messages (`delivered/`, `read/`), oldest first (nothing is read). */
  inboxFilesIn(teamName: string, agentId: string, area: inbox.InboxArea): Promise<string[]> {
    return inbox.messageFiles(inbox.areaDir(this.paths.inboxDir(teamName, agentId), area));
  }

  /** Message files read in parallel (see readMessageFiles): the pending, or those listed from an area. */
  readInboxFiles(teamName: string, files: readonly string[]): Promise<Listed<FiledMessage>> {
    return inbox.readMessageFiles(files, (file) => this.readInboxMessage(teamName, file));
  }

  /** One whole inbox, delivered and read messages included, oldest first. */
  async readInbox(teamName: string, agentId: string): Promise<Listed<FiledMessage>> {
    const files = await this.inboxFiles(teamName, agentId);
    for (const area of ["delivered", "read"] as const)
      files.push(...(await this.inboxFilesIn(teamName, agentId, area)));
    return this.readInboxFiles(teamName, files.sort(inbox.byBaseName));
  }
}

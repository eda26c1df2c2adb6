import { readFile } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { readSlot, writeSlot } from "./heartbeat-slot.ts";
import type { LockTiming } from "./lock.ts";
import { withFileLock } from "./lock.ts";
import { isAgentId, type StoragePaths } from "./paths.ts";
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
import { StatCache } from "./stat-cache.ts";
import {
  createJson,
  ensureStorageRoot,
  listDir,
  parseJson,
  quarantine,
  type ReadResult,
  readJson,
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
  private readonly listedAgents = new StatCache<Awaited<ReturnType<TeamStore["readAgent"]>>>();
  private readonly listedSlots = new StatCache<Awaited<ReturnType<TeamStore["readHeartbeat"]>>>();

  constructor(
    readonly paths: StoragePaths,
    readonly lockTiming: Partial<LockTiming> = {},
  ) {}

  async init(): Promise<void> {
    await ensureStorageRoot(this.paths.root);
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

  readAgent(teamName: string, agentId: string) {
    return readJson(this.paths.agentState(teamName, agentId), AgentStateSchema);
  }

  async writeAgent(state: AgentState): Promise<void> {
    await writeJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state);
  }

  /** Run `fn` holding the agent's lock: per-agent locks keep heartbeats of different agents from contending. */
  withAgentLock<T>(teamName: string, agentId: string, fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.agentState(teamName, agentId), fn, this.lockTiming);
  }

  updateAgent(
    teamName: string,
    agentId: string,
    fn: (current: AgentState | undefined) => AgentState | undefined,
  ) {
    return updateJson(this.paths.agentState(teamName, agentId), AgentStateSchema, fn, this.lockTiming);
  }

  async readHeartbeat(
    teamName: string,
    agentId: string,
  ): Promise<{ record?: HeartbeatRecord; warning?: string }> {
    const slot = await readSlot(this.paths.heartbeatSlot(teamName, agentId));
    if (slot.kind === "ok") return { record: slot.record };
    if (slot.kind === "corrupt") return { warning: slot.warning };
    return {};
  }

  writeHeartbeat(teamName: string, agentId: string, record: HeartbeatRecord): Promise<void> {
    return writeSlot(this.paths.heartbeatSlot(teamName, agentId), record);
  }

  async readAgentView(teamName: string, agentId: string) {
    const [state, heartbeat] = await Promise.all([
      this.readAgent(teamName, agentId),
      this.readHeartbeat(teamName, agentId),
    ]);
    return viewOf(state, heartbeat);
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
    const ids = await this.listAgentIds(teamName);
    const warnings: string[] = [];
    const items: AgentView[] = [];
    const seen = new Set<string>();
    await Promise.all(
      ids.map(async (agentId) => {
        const stateFile = this.paths.agentState(teamName, agentId);
        const slotFile = this.paths.heartbeatSlot(teamName, agentId);
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
        } else if (read.kind === "corrupt") {
          warnings.push(`Skipped agent ${agentId}: ${read.warning}. Re-spawn it if it is still needed.`);
        }
      }),
    );
    this.forgetOthers(teamName, seen);
    items.sort(
      (a, b) =>
        a.state.createdAt.localeCompare(b.state.createdAt) || a.state.name.localeCompare(b.state.name),
    );
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

  async readInbox(teamName: string, agentId: string): Promise<Listed<InboxMessage>> {
    const dir = this.paths.inboxDir(teamName, agentId);
    const files = (await listDir(dir)).filter((file) => file.endsWith(".json")).sort();
    const items: InboxMessage[] = [];
    const warnings: string[] = [];
    for (const file of files) {
      const full = path.join(dir, file);
      const parsed = parseJson(await readFile(full, "utf8").catch(() => ""), InboxMessageSchema);
      if (parsed.ok) items.push(parsed.value);
      else {
        const movedTo = await quarantine(full);
        if (movedTo) warnings.push(`inbox message ${file} was damaged (${parsed.problem}) and moved aside`);
      }
    }
    return { items, warnings };
  }
}

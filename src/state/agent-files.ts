// One agent's files: its state file and heartbeat slot, read, written and changed under the agent's lock.
import { rm } from "node:fs/promises";
import { mapLimit } from "../map-limit.ts";
import { viewOf } from "./agent-view.ts";
import type { DamageNotes } from "./damage-notes.ts";
import { readSlot, writeSlot } from "./heartbeat-slot.ts";
import { type LockPlacement, type LockTiming, withFileLock } from "./lock.ts";
import { assertAgentId, type StoragePaths } from "./paths.ts";
import { type AgentState, AgentStateSchema, type HeartbeatRecord } from "./schemas.ts";
import {
  createJson,
  flushFile,
  ParsedTexts,
  type ReadOptions,
  type ReadResult,
  readJson,
  type UpdateOutcome,
  type WriteOptions,
  writeJson,
} from "./store.ts";

/** Agents read, decided and written at once by a batch: enough to overlap the disk's latency, few enough for its queue. */
const BATCH_IO_CONCURRENCY = 32;

/** One agent's part in a batch: its new state (none: unchanged) and what the caller wants to know about it. */
export interface BatchChange<R> {
  next?: AgentState;
  result: R;
}

/** What a heartbeat slot's read gives: its record, or what was wrong with it. */
export type SlotRead = { record?: HeartbeatRecord; warning?: string };

export class AgentFiles {
  /** Agent files as a heartbeat last read them (see readLiveness). */
  private readonly livenessTexts = new ParsedTexts<AgentState>();

  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
    private readonly damage: DamageNotes,
  ) {}

  async read(teamName: string, agentId: string, options: ReadOptions = {}): Promise<ReadResult<AgentState>> {
    return this.agentAt(teamName, this.paths.agentState(teamName, agentId), options);
  }

  private async agentAt(
    teamName: string,
    file: string,
    options: ReadOptions = {},
    parsedTexts?: ParsedTexts<AgentState>,
  ): Promise<ReadResult<AgentState>> {
    return this.damage.noted(teamName, await readJson(file, AgentStateSchema, options, parsedTexts));
  }

  /**
   * What a heartbeat reads under the agent's lock: the agent's file and its liveness slot, with blocking reads (see
   * ReadOptions): two small files just written, where two thread-pool round trips cost a heartbeat a quarter of its
   * time. An agent file whose text is the one the last such read parsed is not parsed again: most heartbeats find it
   * unchanged.
   */
  async readLiveness(teamName: string, agentId: string) {
    const file = this.paths.agentState(teamName, agentId);
    const agent = await this.agentAt(teamName, file, { blocking: true }, this.livenessTexts);
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
  async write(state: AgentState, options: WriteOptions = {}): Promise<void> {
    await writeJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state, options);
  }

  /** Flush an agent's file to disk: a write made without fsync under its lock, made durable once the lock is free. */
  flush(teamName: string, agentId: string): Promise<void> {
    return flushFile(this.paths.agentState(teamName, agentId));
  }

  /**
   * Write a new agent's first file (spawn, before its launch is done): an exclusive create, not flushed. The file is
   * flushed once the launch recorded the agent active, before the spawn returns. A power cut before that can lose the
   * file or leave it damaged (moved aside on the next read, like any damaged file); that spawn never finished either
   * way.
   */
  async create(state: AgentState): Promise<void> {
    // Blocking calls: a small file on the spawn's way to its prompt, where each thread-pool round trip waits for
    // whatever else the host process is doing.
    await createJson(this.paths.agentState(state.teamName, state.agentId), AgentStateSchema, state, {
      durable: false,
      blocking: true,
    });
  }

  /** Remove an agent's state file and heartbeat slot (a spawn rolled back). */
  async remove(teamName: string, agentId: string): Promise<void> {
    await rm(this.paths.agentState(teamName, agentId), { force: true });
    await rm(this.paths.heartbeatSlot(teamName, agentId), { force: true });
  }

  /** Run `fn` holding the agent's lock: per-agent locks keep heartbeats of different agents from contending. */
  withLock<T>(
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
  update(
    teamName: string,
    agentId: string,
    fn: (current: AgentState | undefined) => AgentState | undefined,
  ): Promise<UpdateOutcome<AgentState>> {
    return this.withLock(teamName, agentId, async () => {
      const read = await this.read(teamName, agentId);
      const current = read.kind === "ok" ? read.value : undefined;
      const warnings = read.kind === "corrupt" ? [read.warning] : [];
      const next = fn(current);
      if (next === undefined) return { value: current, warnings };
      await this.write(next);
      return { value: next, warnings };
    });
  }

  /**
   * Change many agents of one team: `decide` runs for each agent holding that agent's lock, and a new state it returns
   * is written there and then (durably), so every agent file is the one truth about its agent. Agents are handled
   * `BATCH_IO_CONCURRENCY` at a time: a sweep that loses a hundred agents at once stays well under a second.
   * Results are in the order of `agentIds`.
   */
  updateMany<R>(
    teamName: string,
    agentIds: readonly string[],
    decide: (agentId: string, current: AgentState | undefined) => Promise<BatchChange<R>>,
  ): Promise<R[]> {
    return mapLimit(agentIds, BATCH_IO_CONCURRENCY, (agentId) =>
      this.withLock(teamName, agentId, async () => {
        const read = await this.read(teamName, agentId);
        const change = await decide(agentId, read.kind === "ok" ? read.value : undefined);
        if (change.next && read.kind === "ok") await this.write(change.next);
        return change.result;
      }),
    );
  }

  async readHeartbeat(teamName: string, agentId: string, options: ReadOptions = {}): Promise<SlotRead> {
    return this.slotOf(teamName, this.paths.heartbeatSlot(teamName, agentId), options);
  }

  private async slotOf(teamName: string, file: string, options: ReadOptions = {}): Promise<SlotRead> {
    const slot = this.damage.noted(teamName, await readSlot(file, options));
    if (slot.kind === "ok") return { record: slot.record };
    if (slot.kind === "corrupt") return { warning: slot.warning };
    return {};
  }

  writeHeartbeat(teamName: string, agentId: string, record: HeartbeatRecord): void {
    writeSlot(this.paths.heartbeatSlot(teamName, agentId), record);
  }

  /** Views of the given agents, read afresh (no cache), in the order of `agentIds`. */
  readViews(teamName: string, agentIds: readonly string[]) {
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
}

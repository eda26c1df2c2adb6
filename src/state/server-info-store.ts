import { rm } from "node:fs/promises";
import { type LockTiming, withFileLock } from "./lock.ts";
import type { StoragePaths } from "./paths.ts";
import { type ServerInfo, ServerInfoSchema } from "./schemas.ts";
import { type ReadResult, readJson, type UpdateOutcome, updateJson, writeJson } from "./store.ts";

/**
 * A project's server.json: which `opencode serve` runs for it, and its password (0600, see specs/storage.md). Every
 * write holds the file's own lock, so a recount that read an older record cannot write it back over a new one or
 * bring back a removed one. A damaged file is moved aside and taken for absent: no server is recorded.
 */
export class ServerInfoStore {
  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming> = {},
  ) {}

  read(projectRoot: string): Promise<ReadResult<ServerInfo>> {
    return readJson(this.paths.serverInfo(projectRoot), ServerInfoSchema);
  }

  write(projectRoot: string, info: ServerInfo): Promise<void> {
    const file = this.paths.serverInfo(projectRoot);
    return withFileLock(file, () => writeJson(file, ServerInfoSchema, info), this.lockTiming);
  }

  remove(projectRoot: string): Promise<void> {
    const file = this.paths.serverInfo(projectRoot);
    return withFileLock(file, () => rm(file, { force: true }), this.lockTiming);
  }

  /**
   * Read-modify-write under the lock; `fn` sees undefined when no server is recorded (or its record was damaged) and
   * returns the new record, or undefined to leave the file as it is.
   */
  update(
    projectRoot: string,
    fn: (current: ServerInfo | undefined) => Promise<ServerInfo | undefined>,
    options: { durable?: boolean } = {},
  ): Promise<UpdateOutcome<ServerInfo>> {
    return updateJson(this.paths.serverInfo(projectRoot), ServerInfoSchema, fn, this.lockTiming, options);
  }
}

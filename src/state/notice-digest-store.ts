import { type LockTiming, withFileLock } from "./lock.ts";
import type { StoragePaths } from "./paths.ts";
import { NoticeDigestSchema } from "./schemas.ts";
import { readJson, writeJson } from "./store.ts";

/**
 * A team's notice-digest.json: when the leader's last digest of notices went out, and the lock under which one process
 * sends the next. A damaged file is moved aside and read as "no digest yet" (the next one may go at once); the
 * digest runs from timers with no tool call to tell, so the warning goes to `note` (the team's next listing).
 */
export class NoticeDigestStore {
  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
    private readonly note: (teamName: string, warning: string) => void,
  ) {}

  /** Run `fn` holding the team's digest lock. */
  withLock<T>(teamName: string, fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.paths.noticeDigest(teamName), fn, this.lockTiming);
  }

  /** When the last digest went out; undefined when none did or the file was damaged. */
  async lastSentAt(teamName: string): Promise<string | undefined> {
    const read = await readJson(this.paths.noticeDigest(teamName), NoticeDigestSchema);
    if (read.kind === "corrupt") this.note(teamName, read.warning);
    return read.kind === "ok" ? read.value.lastSentAt : undefined;
  }

  async recordSent(teamName: string, lastSentAt: string): Promise<void> {
    await writeJson(this.paths.noticeDigest(teamName), NoticeDigestSchema, { version: 1, lastSentAt });
  }
}

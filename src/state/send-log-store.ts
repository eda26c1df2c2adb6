import type { LockTiming } from "./lock.ts";
import type { StoragePaths } from "./paths.ts";
import { type SendLog, SendLogSchema } from "./schemas.ts";
import { updateJson } from "./store.ts";

/**
 * Each sender's send times of the last minute (send-message's rate limit), one file per sender. A damaged log is moved
 * aside and starts empty: at worst one more minute's messages get through.
 */
export class SendLogStore {
  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
  ) {}

  /**
   * Read-modify-write under the log's lock, not flushed: a lost entry only lets one more message through after a
   * power cut. `fn` sees undefined when the log is missing or damaged. Returns the damage warnings.
   */
  async update(teamName: string, sender: string, fn: (current: SendLog | undefined) => SendLog | undefined) {
    const file = this.paths.sendLog(teamName, sender);
    const { warnings } = await updateJson(file, SendLogSchema, fn, this.lockTiming, { durable: false });
    return warnings.map((warning) => `${warning}; the send rate limit starts over`);
  }
}

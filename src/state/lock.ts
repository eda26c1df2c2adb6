import { mkdir } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import lockfile from "proper-lockfile";

export interface LockTiming {
  /** A lock untouched for this long is taken over (its holder crashed). */
  staleMs: number;
  /** How long to keep retrying before giving up. */
  maxWaitMs: number;
}

const DEFAULT_TIMING: LockTiming = { staleMs: 10_000, maxWaitMs: 30_000 };

export class LockTimeoutError extends Error {
  override name = "LockTimeoutError";
}

/**
 * Run `fn` while holding a cross-process lock on `file` (a `<file>.lock` directory, via proper-lockfile).
 * OpenCode loads this plugin in several processes at once, so every read-modify-write of shared state goes through here.
 */
export async function withFileLock<T>(
  file: string,
  fn: () => Promise<T>,
  timing: Partial<LockTiming> = {},
): Promise<T> {
  const { staleMs, maxWaitMs } = { ...DEFAULT_TIMING, ...timing };
  await mkdir(path.dirname(file), { recursive: true });
  const started = Date.now();
  let release: (() => Promise<void>) | undefined;
  let delay = 1;
  while (!release) {
    try {
      release = await lockfile.lock(file, {
        realpath: false,
        stale: staleMs,
        retries: 0,
        // The default throws from a timer, which would take down the whole OpenCode process.
        onCompromised: () => {},
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ELOCKED") throw error;
      if (Date.now() - started > maxWaitMs) {
        throw new LockTimeoutError(`Timed out after ${maxWaitMs} ms waiting for the lock on ${file}`);
      }
      // Short, jittered waits: critical sections here last well under a millisecond.
      await sleep(delay + Math.random() * delay);
      delay = Math.min(delay * 2, 25);
    }
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => {});
  }
}

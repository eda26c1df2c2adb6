import { constants, unlinkSync } from "node:fs";
import { mkdir, open, rm, stat, unlink, utimes } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

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

/** Locks this process holds, removed if it exits while holding them (a crash leaves them to go stale instead). */
const held = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const lock of held) {
      try {
        unlinkSync(lock);
      } catch {
        // already gone
      }
    }
  });
}

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/**
 * One attempt. The lock is a file created with O_EXCL: of several creators exactly one succeeds, on every local file
 * system. (It used to be a directory made by proper-lockfile; creating and removing an empty file costs a third of
 * a mkdir/rmdir pair on ext4, and heartbeats take a lock each.) A lock left by a crashed holder, file or directory,
 * is taken over once its mtime is older than `staleMs`.
 */
async function tryAcquire(lock: string, staleMs: number): Promise<boolean> {
  try {
    const handle = await open(lock, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o644);
    await handle.close();
    return true;
  } catch (error) {
    if (code(error) === "ENOENT") {
      await mkdir(path.dirname(lock), { recursive: true });
      return false;
    }
    if (code(error) !== "EEXIST") throw error;
  }
  const info = await stat(lock).catch(() => undefined);
  // Gone meanwhile: the holder just released it.
  if (!info) return false;
  if (Date.now() - info.mtimeMs <= staleMs) return false;
  await rm(lock, { recursive: true, force: true });
  return false;
}

/**
 * Run `fn` while holding a cross-process lock on `file` (a `<file>.lock` file next to it).
 * OpenCode loads this plugin in several processes at once, so every read-modify-write of shared state goes through here.
 */
export async function withFileLock<T>(
  file: string,
  fn: () => Promise<T>,
  timing: Partial<LockTiming> = {},
): Promise<T> {
  const { staleMs, maxWaitMs } = { ...DEFAULT_TIMING, ...timing };
  const lock = `${file}.lock`;
  const started = Date.now();
  let delay = 0.25;
  while (!(await tryAcquire(lock, staleMs))) {
    if (Date.now() - started > maxWaitMs) {
      throw new LockTimeoutError(`Timed out after ${maxWaitMs} ms waiting for the lock on ${file}`);
    }
    // Short, jittered waits: critical sections here last well under a millisecond.
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 25);
  }
  installExitHook();
  held.add(lock);
  // A holder that legitimately keeps the lock for long (a server start) keeps it fresh, so nobody takes it over.
  const refresh = setInterval(
    () => {
      const now = new Date();
      utimes(lock, now, now).catch(() => {});
    },
    Math.max(1, Math.floor(staleMs / 3)),
  );
  refresh.unref?.();
  try {
    return await fn();
  } finally {
    clearInterval(refresh);
    held.delete(lock);
    await unlink(lock).catch(() => {});
  }
}

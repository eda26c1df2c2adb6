import { constants, unlinkSync } from "node:fs";
import { mkdir, open, readdir, rm, stat, unlink, utimes } from "node:fs/promises";
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
 * Retry `attempt` with short, jittered waits (critical sections here last well under a millisecond) until it
 * succeeds or `maxWaitMs` has passed.
 */
async function retryUntil(attempt: () => Promise<boolean>, maxWaitMs: number, what: string): Promise<void> {
  const started = Date.now();
  let delay = 0.25;
  while (!(await attempt())) {
    if (Date.now() - started > maxWaitMs)
      throw new LockTimeoutError(`Timed out after ${maxWaitMs} ms ${what}`);
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 25);
  }
}

/**
 * Take the lock on `file`; returns the function that releases it. `admit`, checked once the lock is taken, can turn
 * the holder away (the lock is given back and the wait goes on): that is how a lock defers to a wider one.
 */
async function acquireFileLock(
  file: string,
  timing: Partial<LockTiming>,
  admit?: () => Promise<boolean>,
): Promise<() => Promise<void>> {
  const { staleMs, maxWaitMs } = { ...DEFAULT_TIMING, ...timing };
  const lock = `${file}.lock`;
  await retryUntil(
    async () => {
      if (!(await tryAcquire(lock, staleMs))) return false;
      if (!admit || (await admit())) return true;
      await unlink(lock).catch(() => {});
      return false;
    },
    maxWaitMs,
    `waiting for the lock on ${file}`,
  );
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
  return async () => {
    clearInterval(refresh);
    held.delete(lock);
    await unlink(lock).catch(() => {});
  };
}

/**
 * Run `fn` while holding a cross-process lock on `file` (a `<file>.lock` file next to it).
 * OpenCode loads this plugin in several processes at once, so every read-modify-write of shared state goes through here.
 * With `admit`, the lock is only kept once `admit` says so (see acquireFileLock).
 */
export async function withFileLock<T>(
  file: string,
  fn: () => Promise<T>,
  timing: Partial<LockTiming> = {},
  admit?: () => Promise<boolean>,
): Promise<T> {
  const release = await acquireFileLock(file, timing, admit);
  try {
    return await fn();
  } finally {
    await release();
  }
}

/** Whether someone holds the lock on `file` (a lock gone stale does not count: its holder crashed). */
export async function isLocked(file: string, timing: Partial<LockTiming> = {}): Promise<boolean> {
  const { staleMs } = { ...DEFAULT_TIMING, ...timing };
  const info = await stat(`${file}.lock`).catch(() => undefined);
  return info !== undefined && Date.now() - info.mtimeMs <= staleMs;
}

/**
 * Wait until none of `files` is locked. Only meaningful while new lockers are kept out (their `admit` fails): then
 * once this returns, nobody holds or will take these locks until the caller lets them. One directory listing per
 * check, however many files: creating a thousand lock files would cost far more (creates in one directory
 * serialise on it).
 */
export async function waitUntilUnlocked(
  files: readonly string[],
  timing: Partial<LockTiming> = {},
): Promise<void> {
  const { maxWaitMs } = { ...DEFAULT_TIMING, ...timing };
  const byDir = new Map<string, Set<string>>();
  for (const file of files) {
    const dir = path.dirname(file);
    const names = byDir.get(dir) ?? new Set<string>();
    names.add(`${path.basename(file)}.lock`);
    byDir.set(dir, names);
  }
  await retryUntil(
    async () => {
      for (const [dir, names] of byDir) {
        const entries = await readdir(dir).catch(() => [] as string[]);
        for (const entry of entries) {
          if (names.has(entry) && (await isLocked(path.join(dir, entry.slice(0, -".lock".length)), timing)))
            return false;
        }
      }
      return true;
    },
    maxWaitMs,
    `waiting for ${files.length} lock(s) to be released`,
  );
}

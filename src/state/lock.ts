// Taking, holding and giving back the cross-process lock on a state file: the face the stores use. What a lock is on
// disk is in lock-instance.ts; when an abandoned one is taken over, in lock-takeover.ts.
import { lutimes } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { inspect, newOwnerToken, removeNow, tryCreate } from "./lock-instance.ts";
import { isOwnFresh, isStale, removeUnderGuard, sameStale } from "./lock-takeover.ts";

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

export interface LockPlacement {
  /**
   * Create the lock's directory when it is missing (the default). Off for a lock on something that lives in that
   * directory: a missing directory then means the thing does not exist, and a lock must not bring the directory into
   * being (a heartbeat naming a team that does not exist would leave an empty team behind).
   */
  createDir?: boolean;
}

/** Locks this process holds, removed if it exits while holding them (a crash leaves them to go stale instead). */
const held = new Map<string, { owner: string; staleMs: number }>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const [lock, { owner, staleMs }] of held) {
      // Only a lock still ours and fresh goes (see release); anything else is left to go stale.
      if (isOwnFresh(inspect(lock), owner, staleMs)) removeNow(lock);
    }
  });
}

/**
 * One attempt. The lock is created exclusively holding its owner's token (tryCreate): of several creators exactly one
 * succeeds, on every local file system. (It used to be a directory made by proper-lockfile; creating and removing a
 * link or a small file costs a third of a mkdir/rmdir pair on ext4, and heartbeats take a lock each.) An abandoned lock
 * (see isStale), whatever its kind, is removed under the takeover guard; then the attempt competes to create it.
 */
async function tryAcquire(
  lock: string,
  owner: string,
  staleMs: number,
  placement: LockPlacement = {},
): Promise<boolean> {
  if (tryCreate(lock, owner, placement.createDir !== false)) return true;
  const judged = inspect(lock);
  // Gone meanwhile: the holder just released it.
  if (!judged || !isStale(judged, staleMs)) return false;
  const removal = await removeUnderGuard(lock, staleMs, (seen) => sameStale(seen, judged, staleMs));
  return removal === "removed" && tryCreate(lock, owner, placement.createDir !== false);
}

/**
 * Give back a lock taken with `owner`, and only that lock: one taken over meanwhile (its holder stalled past
 * `staleMs`) belongs to someone else now. A lock that is still fresh cannot be under takeover, so it goes at once;
 * an older one only under the takeover guard.
 */
async function release(lock: string, owner: string, timing: LockTiming): Promise<void> {
  const seen = inspect(lock);
  if (seen?.owner !== owner) return;
  if (isOwnFresh(seen, owner, timing.staleMs)) {
    removeNow(lock);
    return;
  }
  await retryUntil(
    async () => (await removeUnderGuard(lock, timing.staleMs, (now) => now.owner === owner)) !== "busy",
    timing.maxWaitMs,
    `releasing the lock ${lock}`,
  ).catch(() => {
    // Left in place: it is stale, so the next locker takes it over.
  });
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
 * Keep a lock fresh while its holder legitimately keeps it for long (a server start), so nobody takes it over, even
 * after the holder stalled: a live holder must never look abandoned. A lock no longer ours is left alone. A taker
 * that judged the old mtime backs off under its guard (it re-checks the mtime), and one past that check has judged a
 * holder stalled beyond the stale time (see specs/storage.md).
 */
async function refresh(lock: string, owner: string): Promise<void> {
  if (inspect(lock)?.owner !== owner) return;
  const now = new Date();
  // The link's own time: following it would reach its target, a token and no file.
  await lutimes(lock, now, now);
}

/** Take the lock on `file`; returns the function that releases it. */
async function acquireFileLock(
  file: string,
  timing: Partial<LockTiming>,
  placement: LockPlacement,
): Promise<() => Promise<void>> {
  const full = { ...DEFAULT_TIMING, ...timing };
  const lock = `${file}.lock`;
  const owner = newOwnerToken();
  await retryUntil(
    () => tryAcquire(lock, owner, full.staleMs, placement),
    full.maxWaitMs,
    `waiting for the lock on ${file}`,
  );
  return holdLock(lock, owner, full);
}

/**
 * Take the lock on `file` if nobody holds it (an abandoned one is taken over as usual), without waiting: the release
 * function, or undefined when a live holder has it. For work that one process doing is enough (the spare worktree).
 */
export async function tryFileLock(
  file: string,
  timing: Partial<LockTiming> = {},
  placement: LockPlacement = {},
): Promise<(() => Promise<void>) | undefined> {
  const full = { ...DEFAULT_TIMING, ...timing };
  const lock = `${file}.lock`;
  const owner = newOwnerToken();
  if (!(await tryAcquire(lock, owner, full.staleMs, placement))) return undefined;
  return holdLock(lock, owner, full);
}

/** A lock just taken: refreshed while held, released by the function returned (or when the process exits). */
function holdLock(lock: string, owner: string, full: LockTiming): () => Promise<void> {
  installExitHook();
  held.set(lock, { owner, staleMs: full.staleMs });
  const refresher = setInterval(
    () => {
      refresh(lock, owner).catch(() => {});
    },
    Math.max(1, Math.floor(full.staleMs / 6)),
  );
  refresher.unref?.();
  return async () => {
    clearInterval(refresher);
    held.delete(lock);
    await release(lock, owner, full);
  };
}

/**
 * Run `fn` while holding a cross-process lock on `file` (`<file>.lock` next to it, see tryCreate).
 * OpenCode loads this plugin in several processes at once, so every read-modify-write of shared state goes through here.
 * Taking a free lock and giving it back are blocking calls: when `fn` does its I/O with blocking calls too (the
 * `blocking` read and write options), the lock is held through no turn of the event loop, so a process busy with
 * other work cannot keep it for the length of its stalls.
 */
export async function withFileLock<T>(
  file: string,
  fn: () => Promise<T>,
  timing: Partial<LockTiming> = {},
  placement: LockPlacement = {},
): Promise<T> {
  const release = await acquireFileLock(file, timing, placement);
  try {
    return await fn();
  } finally {
    await release();
  }
}

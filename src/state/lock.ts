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
 * `staleMs`) belongs to someone else now. A lock that is still fresh cannot be under takeover, so it goes at once,
 * without an await (undefined returned); an older one only under the takeover guard.
 */
function release(lock: string, owner: string, timing: LockTiming): Promise<void> | undefined {
  const seen = inspect(lock);
  if (seen?.owner !== owner) return undefined;
  if (isOwnFresh(seen, owner, timing.staleMs)) {
    removeNow(lock);
    return undefined;
  }
  return releaseUnderGuard(lock, owner, timing);
}

async function releaseUnderGuard(lock: string, owner: string, timing: LockTiming): Promise<void> {
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

/** A held lock's release: a promise only when giving it back needs an await (see `release`). */
type Release = () => Promise<void> | undefined;

/**
 * Take the lock on `file`; returns the function that releases it. A free lock (most are) is taken at once, without an
 * await: heartbeats take one each, and every await is a hop through the microtask queue.
 */
function acquireFileLock(
  file: string,
  timing: Partial<LockTiming>,
  placement: LockPlacement,
): Release | Promise<Release> {
  const full = { ...DEFAULT_TIMING, ...timing };
  const lock = `${file}.lock`;
  const owner = newOwnerToken();
  if (tryCreate(lock, owner, placement.createDir !== false)) return holdLock(lock, owner, full);
  return acquireAfterWait(file, lock, owner, full, placement);
}

async function acquireAfterWait(
  file: string,
  lock: string,
  owner: string,
  full: LockTiming,
  placement: LockPlacement,
): Promise<Release> {
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
  const release = holdLock(lock, owner, full);
  return async () => {
    await release();
  };
}

/** A lock just taken: refreshed while held, released by the function returned (or when the process exits). */
function holdLock(lock: string, owner: string, full: LockTiming): Release {
  installExitHook();
  held.set(lock, { owner, staleMs: full.staleMs });
  const refresher = setInterval(
    () => {
      refresh(lock, owner).catch(() => {});
    },
    Math.max(1, Math.floor(full.staleMs / 6)),
  );
  refresher.unref?.();
  return () => {
    clearInterval(refresher);
    held.delete(lock);
    return release(lock, owner, full);
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
  const taken = acquireFileLock(file, timing, placement);
  const release = taken instanceof Promise ? await taken : taken;
  try {
    return await fn();
  } finally {
    const releasing = release();
    if (releasing) await releasing;
  }
}

import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { link, lutimes, rename, rm } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { makePrivateDirNow, PRIVATE_FILE_MODE } from "./modes.ts";

export interface LockTiming {
  /** A lock untouched for this long is taken over (its holder crashed). */
  staleMs: number;
  /** How long to keep retrying before giving up. */
  maxWaitMs: number;
}

const DEFAULT_TIMING: LockTiming = { staleMs: 10_000, maxWaitMs: 30_000 };
/** A lock whose mtime is further ahead than this was made before the clock went back: it is stale. */
const FUTURE_SKEW_MS = 2_000;
/**
 * A lock or guard of a live process of this host goes stale only after this many `staleMs`: its holder refreshes it
 * whatever its age, so it is this old only if the holder stalled that long or died and its pid was reused.
 */
const LIVE_OWNER_STALE_FACTOR = 6;
const HOST = hostname();

export class LockTimeoutError extends Error {
  override name = "LockTimeoutError";
}

/** The lock's directory does not exist and the caller said not to create it (see `LockPlacement`). */
export class LockDirectoryMissingError extends Error {
  override name = "LockDirectoryMissingError";
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

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/** What a lock says about its holder: `<pid> <host> <random>`, unique to one acquisition. */
function newOwnerToken(): string {
  return `${process.pid} ${HOST} ${randomBytes(8).toString("hex")}`;
}

/** One lock instance: its identity, age and owner, and whether it is a link (the kind tryCreate makes). */
interface Seen {
  ino: number;
  mtimeMs: number;
  owner: string;
  link: boolean;
}

/**
 * Stat first, then read: a lock never comes back once removed, so when the owner read is one's own, or the lock is
 * re-checked under the takeover guard (nobody can remove an abandoned lock meanwhile), the stat was of that same lock.
 * Neither call follows a link: a lock is a symbolic link whose target is its owner's token (see tryCreate), and a lock
 * of an older version, or of a file system without links, is a file holding the token (or a directory, without one).
 * Synchronous on purpose: both calls are answered from memory in microseconds, and every release does this
 * (heartbeats take a lock each): the async calls' round trips through the thread pool cost more than the calls.
 */
function inspect(lock: string): Seen | undefined {
  try {
    const info = lstatSync(lock);
    let owner = "";
    if (info.isSymbolicLink()) owner = readlinkSync(lock);
    else if (info.isFile()) owner = readFileSync(lock, "utf8");
    return { ino: info.ino, mtimeMs: info.mtimeMs, owner, link: info.isSymbolicLink() };
  } catch {
    // Gone (released meanwhile), or unreadable: no lock to judge.
    return undefined;
  }
}

/** Whether a lock's token names a process of this host: "dead", "alive", or undefined (another host, no token). */
function localOwner(owner: string): "dead" | "alive" | undefined {
  const [pidText, host] = owner.split(" ");
  const pid = Number(pidText);
  if (host !== HOST || !Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return "alive";
  } catch (error) {
    return code(error) === "ESRCH" ? "dead" : "alive";
  }
}

/** See specs/storage.md (Cross-process safety) for when a lock (or a takeover guard) counts as abandoned. */
function isStale(seen: Seen, staleMs: number): boolean {
  const age = Date.now() - seen.mtimeMs;
  if (age < -FUTURE_SKEW_MS) return true;
  const local = localOwner(seen.owner);
  if (local === "dead") return true;
  return age > (local === "alive" ? staleMs * LIVE_OWNER_STALE_FACTOR : staleMs);
}

/** How breakIfSame names a guard it moves aside: `<lock>.takeover.<16 hex>.aside`. */
export const ASIDE_GUARD_NAME = /\.takeover\.[0-9a-f]{16}\.aside$/;

/**
 * Break an abandoned takeover guard only if what is there passes `stillSame`: move whatever is at the path to a unique
 * name, judge what was moved, and put it back (link, which never replaces a newer file) if it is not the one judged.
 * Several waiters may judge one abandoned guard at once, and nothing serialises them: a check on the path followed by
 * a removal by path would remove the guard a live taker created in between.
 */
async function breakIfSame(file: string, stillSame: (seen: Seen) => boolean): Promise<"removed" | "changed"> {
  // A crash before the removal below leaves this name; the liveness loop removes it an hour later (stray-temps.ts).
  const aside = `${file}.${randomBytes(8).toString("hex")}.aside`;
  try {
    await rename(file, aside);
  } catch (error) {
    if (code(error) === "ENOENT") return "changed";
    throw error;
  }
  const seen = inspect(aside);
  if (seen && stillSame(seen)) {
    await rm(aside, { recursive: true, force: true });
    return "removed";
  }
  // Not the one judged: a live holder's. Put it back; if the path was taken meanwhile, the holder has lost it and its
  // token check keeps it from removing the newer one.
  await link(aside, file).catch(async (error) => {
    if (code(error) === "EEXIST") return;
    // Where link() follows a final symbolic link (macOS, the BSDs; Linux does not) a guard that is a link is made again
    // from its token: symlink, like link, never replaces what took the path meanwhile.
    if (seen?.link) {
      try {
        tryCreate(file, seen.owner);
      } catch {
        // A guard that cannot be put back is lost; its taker's token check then leaves the path alone.
      }
      return;
    }
    // A directory (an older version's lock) cannot be linked; moving it back is safe only when nothing took the path.
    await rename(aside, file).catch(() => {});
  });
  await rm(aside, { recursive: true, force: true });
  return "changed";
}

/**
 * Remove `lock` if `stillSame` holds for what is there, under the lock's takeover guard (`<lock>.takeover`, taken like
 * a lock). Every removal of a lock that may be stale goes through the guard and re-checks under it, so two takers
 * that judged the same stale lock cannot remove a lock one of them (or anyone) has created since: judging and
 * removing are one step. "busy": another process holds the guard; try again later.
 */
async function removeUnderGuard(
  lock: string,
  staleMs: number,
  stillSame: (seen: Seen) => boolean,
): Promise<"removed" | "changed" | "busy"> {
  const guard = `${lock}.takeover`;
  const token = newOwnerToken();
  if (!tryCreate(guard, token)) {
    // Held for microseconds by a live taker: one found stale crashed mid-takeover. Broken like a lock, atomically, so
    // two waiters that judged it cannot each break a guard and both hold one.
    const judged = inspect(guard);
    if (judged && isStale(judged, staleMs))
      await breakIfSame(guard, (seen) => sameStale(seen, judged, staleMs));
    return "busy";
  }
  try {
    // Under the guard the lock can only appear (a locker creates it) or be released fresh by its own live holder, never
    // be replaced: so a check and a removal by path are one step here. Moving it aside instead would empty the path
    // for a moment whenever it is not the one judged, and a locker could create a second lock beside its holder.
    const seen = inspect(lock);
    if (!seen || !stillSame(seen)) return "changed";
    await rm(lock, { recursive: true, force: true });
    return "removed";
  } finally {
    // Only our own guard: one broken while we stalled belongs to another taker now.
    if (inspect(guard)?.owner === token) removeNow(guard);
  }
}

/** The very instance judged (same inode, token and mtime), and still abandoned. */
function sameStale(seen: Seen, judged: Seen, staleMs: number): boolean {
  return (
    seen.ino === judged.ino &&
    seen.owner === judged.owner &&
    seen.mtimeMs === judged.mtimeMs &&
    isStale(seen, staleMs)
  );
}

const CREATE_EXCLUSIVE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;

/** What `symlink` fails with on a file system that has no symbolic links (FAT, some FUSE and network mounts). */
const NO_SYMLINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/**
 * Create `file` exclusively holding `owner`; false when it exists. The lock is a symbolic link whose target is the
 * token, which `symlink` creates atomically or not at all, like an `O_EXCL` create: a target this short lives in the
 * link's inode, where a token written into a new file needs a data block of its own (a create with the token written
 * and a release cost 38 us here, a link 22 us, an empty file 18 us; heartbeats take a lock each). Where links are
 * refused, the lock is an `O_EXCL` file holding the token: either kind makes the other's creation fail, so processes
 * that create different kinds still exclude each other. Blocking calls on purpose, like the release: a lock taken and
 * given back with no await on the file system in between is held for the microseconds of its critical section, while
 * an async create or unlink finishes only on a later turn of the event loop, which a busy host process (OpenCode's
 * server answering its panes) delays by tens to hundreds of ms, all of it with the lock held.
 */
function tryCreate(file: string, owner: string, placement: LockPlacement = {}): boolean {
  try {
    symlinkSync(owner, file);
    return true;
  } catch (error) {
    if (NO_SYMLINKS.has(code(error) ?? "")) return tryCreateFile(file, owner, placement);
    return notCreated(error, file, placement);
  }
}

/**
 * Why a create failed: `file` exists, or its directory was missing (made now, unless `placement` forbids it); any
 * other error is thrown.
 */
function notCreated(error: unknown, file: string, placement: LockPlacement): false {
  if (code(error) === "EEXIST") return false;
  if (code(error) !== "ENOENT") throw error;
  if (placement.createDir === false) throw new LockDirectoryMissingError(`No directory for the lock ${file}`);
  makePrivateDirNow(path.dirname(file));
  return false;
}

/** The lock as a file holding the token, for a file system without symbolic links. */
function tryCreateFile(file: string, owner: string, placement: LockPlacement): boolean {
  let fd: number;
  try {
    fd = openSync(file, CREATE_EXCLUSIVE, PRIVATE_FILE_MODE);
  } catch (error) {
    return notCreated(error, file, placement);
  }
  try {
    // Whole, however many writes it takes: a short token would not be recognised as ours at release. A failed write
    // leaves an ownerless lock that goes stale; it is not removed here, since an error does not say whose file it is.
    writeFileSync(fd, owner);
  } finally {
    closeSync(fd);
  }
  return true;
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
  if (tryCreate(lock, owner, placement)) return true;
  const judged = inspect(lock);
  // Gone meanwhile: the holder just released it.
  if (!judged || !isStale(judged, staleMs)) return false;
  const removal = await removeUnderGuard(lock, staleMs, (seen) => sameStale(seen, judged, staleMs));
  return removal === "removed" && tryCreate(lock, owner, placement);
}

/** Remove `file` with a blocking call, if it is there. */
export function removeNow(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

/** Ours, and young enough that nobody can be taking it over: it may be removed without the guard. */
function isOwnFresh(seen: Seen | undefined, owner: string, staleMs: number): boolean {
  if (seen?.owner !== owner) return false;
  const age = Date.now() - seen.mtimeMs;
  return age >= -FUTURE_SKEW_MS && age < staleMs / 2;
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

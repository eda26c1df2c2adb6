// One lock on disk: the owner's token it holds, its exclusive creation (a symbolic link, else a file), reading it
// back, and removing it. When a lock may be removed is decided in lock-takeover.ts and lock.ts.
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
import { hostname } from "node:os";
import path from "node:path";
import { makePrivateDirNow, PRIVATE_FILE_MODE } from "./modes.ts";

const HOST = hostname();

/** The lock's directory does not exist and the caller said not to create it (see `LockPlacement`). */
export class LockDirectoryMissingError extends Error {
  override name = "LockDirectoryMissingError";
}

export function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/** What a lock says about its holder: `<pid> <host> <random>`, unique to one acquisition. */
export function newOwnerToken(): string {
  return `${process.pid} ${HOST} ${randomBytes(8).toString("hex")}`;
}

/** Whether a lock's token names a process of this host: "dead", "alive", or undefined (another host, no token). */
export function localOwner(owner: string): "dead" | "alive" | undefined {
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

/** One lock instance: its identity, age and owner, and whether it is a link (the kind tryCreate makes). */
export interface Seen {
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
export function inspect(lock: string): Seen | undefined {
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
export function tryCreate(file: string, owner: string, createDir = true): boolean {
  try {
    symlinkSync(owner, file);
    return true;
  } catch (error) {
    if (NO_SYMLINKS.has(code(error) ?? "")) return tryCreateFile(file, owner, createDir);
    return notCreated(error, file, createDir);
  }
}

/**
 * Why a create failed: `file` exists, or its directory was missing (made now, unless `createDir` is false); any
 * other error is thrown.
 */
function notCreated(error: unknown, file: string, createDir: boolean): false {
  if (code(error) === "EEXIST") return false;
  if (code(error) !== "ENOENT") throw error;
  if (!createDir) throw new LockDirectoryMissingError(`No directory for the lock ${file}`);
  makePrivateDirNow(path.dirname(file));
  return false;
}

/** The lock as a file holding the token, for a file system without symbolic links. */
function tryCreateFile(file: string, owner: string, createDir: boolean): boolean {
  let fd: number;
  try {
    fd = openSync(file, CREATE_EXCLUSIVE, PRIVATE_FILE_MODE);
  } catch (error) {
    return notCreated(error, file, createDir);
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

/** Remove `file` with a blocking call, if it is there. */
export function removeNow(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

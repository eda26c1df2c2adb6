import { lstatSync, readFileSync, readlinkSync } from "node:fs";
import { lutimes } from "node:fs/promises";

/**
 * A lock as the store makes it (a symbolic link whose target is its owner's token) or as an older version or a file
 * system without links leaves it (a file holding the token). None of these follows the link: its target is a token,
 * not a file.
 */
export function lockExists(lock: string): boolean {
  return lstatSync(lock, { throwIfNoEntry: false }) !== undefined;
}

/** The lock's owner token; "" when there is no lock (or it has no token, or went between the two calls). */
export function lockOwner(lock: string): string {
  try {
    const info = lstatSync(lock);
    if (info.isSymbolicLink()) return readlinkSync(lock);
    return info.isFile() ? readFileSync(lock, "utf8") : "";
  } catch {
    return "";
  }
}

/** Set the lock's own mtime, as a holder's refresh does (or a crash long ago left it). */
export function setLockTime(lock: string, when: Date): Promise<void> {
  return lutimes(lock, when, when);
}

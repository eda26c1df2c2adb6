import { lstat, rmdir, unlink } from "node:fs/promises";
import { ASIDE_GUARD_NAME } from "./lock-takeover.ts";
import type { StoragePaths } from "./paths.ts";
import { walkStorage } from "./storage-walk.ts";
import { TEMP_NAME } from "./store.ts";

/**
 * Older than this, a temporary file is nobody's write in progress: a write renames its file within milliseconds, and
 * a taker removes the guard it moved aside within milliseconds too. Its writer's pid is not asked: the storage may be
 * shared with another host, where the pid means nothing here.
 */
export const STRAY_TEMP_AGE_MS = 60 * 60 * 1000;

/** What a crash can leave under each of our temporary names, and which of its times says how long ago that was. */
type Leftover = "write" | "guard";

function leftoverKind(name: string): Leftover | undefined {
  if (TEMP_NAME.test(name)) return "write";
  if (ASIDE_GUARD_NAME.test(name)) return "guard";
  return undefined;
}

/**
 * Remove `file` if it is still what a crash leaves under its name and was last touched before `before`; whether it was
 * removed. A write's temporary file is a regular file, last written when it was left. A guard moved aside is a link
 * (a file, or an empty directory, from an older version) whose own mtime may be hours old when it is moved: the move
 * sets its ctime, so that one says how long it has been aside.
 */
async function removeIfOld(file: string, kind: Leftover, before: number): Promise<boolean> {
  try {
    const info = await lstat(file);
    if (kind === "write" ? !info.isFile() || info.mtimeMs >= before : info.ctimeMs >= before) return false;
    if (info.isDirectory()) await rmdir(file);
    else await unlink(file);
    return true;
  } catch {
    // Renamed into place, put back, or removed by another process meanwhile (or a directory that is not empty).
    return false;
  }
}

/**
 * Remove what a process of this plugin left when it died between creating a temporary name and renaming it into place
 * or removing it, last touched before `before` (ms since the epoch): a write's temporary file (store.ts TEMP_NAME), or
 * a takeover guard it had moved aside (lock-takeover.ts ASIDE_GUARD_NAME). No reader takes them for state, but
 * nothing else removes them. A write's temporary name that is a link is neither followed nor removed; an unlink of a
 * guard's link removes the link alone. Returns how many went.
 */
export async function removeStrayTemps(paths: StoragePaths, before: number): Promise<number> {
  let removed = 0;
  await walkStorage(paths, async (file, entry) => {
    const kind = leftoverKind(entry.name);
    if (!kind) return true;
    if (await removeIfOld(file, kind, before)) removed++;
    return false;
  });
  return removed;
}

import { lstat, unlink } from "node:fs/promises";
import type { StoragePaths } from "./paths.ts";
import { walkStorage } from "./storage-walk.ts";
import { TEMP_NAME } from "./store.ts";

/**
 * Older than this, a temporary file is nobody's write in progress: a write renames its file within milliseconds. Its
 * writer's pid is not asked: the storage may be shared with another host, where the pid means nothing here.
 */
export const STRAY_TEMP_AGE_MS = 60 * 60 * 1000;

/** Remove `file` if it is still a regular file last changed before `before`; whether it was removed. */
async function removeIfOld(file: string, before: number): Promise<boolean> {
  try {
    const info = await lstat(file);
    if (!info.isFile() || info.mtimeMs >= before) return false;
    await unlink(file);
    return true;
  } catch {
    // Renamed into place or removed by another process meanwhile.
    return false;
  }
}

/**
 * Remove the temporary files a writer of this plugin left when it died between creating one and renaming it into
 * place (store.ts TEMP_NAME), last changed before `before` (ms since the epoch). No reader takes them for state, but
 * nothing else removes them. Symbolic links are neither followed nor removed. Returns how many went.
 */
export async function removeStrayTemps(paths: StoragePaths, before: number): Promise<number> {
  let removed = 0;
  await walkStorage(paths, async (file, entry) => {
    if (entry.isFile() && TEMP_NAME.test(entry.name) && (await removeIfOld(file, before))) removed++;
    return true;
  });
  return removed;
}

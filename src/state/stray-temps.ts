import type { Dirent } from "node:fs";
import { lstat, readdir, unlink } from "node:fs/promises";
import path from "node:path";

/**
 * The temporary files a writer of this plugin leaves when it dies between creating one and renaming it into place
 * (store.ts tempName: `<file>.<pid>.<8 hex>.tmp`). No reader takes them for state, but nothing else removes them.
 */
const TEMP_NAME = /\.\d+\.[0-9a-f]{8}\.tmp$/;

/**
 * Older than this, a temporary file is nobody's write in progress: a write renames its file within milliseconds. Its
 * writer's pid is not asked: the storage may be shared with another host, where the pid means nothing here.
 */
export const STRAY_TEMP_AGE_MS = 60 * 60 * 1000;

/** Top-level folders of the root that are not state: the agents' checkouts hold the user's files. */
const NOT_STATE = new Set(["worktrees"]);

async function entries(dir: string): Promise<Dirent[]> {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch {
    // Gone meanwhile (a team deleted), or not ours to read: nothing to tidy there.
    return [];
  }
}

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
 * Remove this plugin's temporary files under the storage root `root` last changed before `before` (ms since the epoch),
 * leaving the agents' worktrees alone. Symbolic links are neither followed nor removed. Returns how many went.
 */
export async function removeStrayTemps(root: string, before: number): Promise<number> {
  let removed = 0;
  const visit = async (dir: string, top: boolean): Promise<void> => {
    for (const entry of await entries(dir)) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!(top && NOT_STATE.has(entry.name))) await visit(file, false);
      } else if (entry.isFile() && TEMP_NAME.test(entry.name) && (await removeIfOld(file, before))) removed++;
    }
  };
  await visit(root, true);
  return removed;
}

import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";
import type { StoragePaths } from "./paths.ts";

/**
 * Walk the storage tree depth first, handing `visit` each entry with its full path; a directory is entered when
 * `visit` returns true for it. Never into the worktrees: the agents' and the spare checkouts hold the project's own
 * files (a `bun.lock`, a user's `.tmp`), none of them ours. Entries are as `readdir` sees them, so a link is never
 * entered. A directory gone meanwhile, or unreadable, is skipped.
 */
export async function walkStorage(
  paths: StoragePaths,
  visit: (file: string, entry: Dirent) => Promise<boolean>,
): Promise<void> {
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch((): Dirent[] => [])) {
      const file = path.join(dir, entry.name);
      if ((await visit(file, entry)) && entry.isDirectory() && file !== paths.worktreesDir) await walk(file);
    }
  };
  await walk(paths.root);
}

import { existsSync } from "node:fs";
import path from "node:path";

/** The CLI runs where a human is: the enclosing git worktree (as OpenCode's worktree), else the directory itself. */
export function findProjectRoot(start: string): string {
  let dir = path.resolve(start);
  for (;;) {
    if (existsSync(path.join(dir, ".git"))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return path.resolve(start);
    dir = parent;
  }
}

import { existsSync } from "node:fs";
import path from "node:path";
import { DEFAULT_STORAGE_SUBDIR, PROJECT_ROOT_ENV } from "./state/paths.ts";

/**
 * The project root the state lives under. Inside the project server we started, OPENCODE_TEAMS_PROJECT_ROOT names the
 * leader's root: OpenCode loads the plugin once per directory there, and an agent working in a sub-directory, another
 * worktree or a nested repository must still find the leader's state. Otherwise: OpenCode reports worktree "/" for a directory outside any git repository,
 * so the worktree is only trusted when it actually contains the directory. Without one, a session opened in a
 * sub-directory joins the nearest enclosing directory that already holds team state, so one project never ends up
 * with two disconnected storage dirs.
 */
export function resolveProjectRoot(
  input: { worktree?: string; directory: string },
  exists: (file: string) => boolean = existsSync,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const pinned = env[PROJECT_ROOT_ENV];
  if (pinned && path.isAbsolute(pinned)) return path.resolve(pinned);
  const directory = path.resolve(input.directory);
  const worktree = input.worktree ? path.resolve(input.worktree) : undefined;
  if (worktree && worktree !== path.parse(worktree).root && isInside(directory, worktree)) return worktree;
  for (let dir = directory; ; dir = path.dirname(dir)) {
    if (exists(path.join(dir, DEFAULT_STORAGE_SUBDIR))) return dir;
    if (path.dirname(dir) === dir) return directory;
  }
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

import path from "node:path";

/**
 * The project root the state lives under. OpenCode reports worktree "/" for a directory outside any git repository,
 * so the worktree is only trusted when it actually contains the directory.
 */
export function resolveProjectRoot(input: { worktree?: string; directory: string }): string {
  const directory = path.resolve(input.directory);
  const worktree = input.worktree ? path.resolve(input.worktree) : undefined;
  if (worktree && worktree !== path.parse(worktree).root && isInside(directory, worktree)) return worktree;
  return directory;
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

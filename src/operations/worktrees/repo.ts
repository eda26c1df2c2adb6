import path from "node:path";
import type { GitApi } from "../../edges/git-api.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError } from "../result.ts";

/** The leader's repository and where its agents' worktrees go: shared by the worktrees, the spare and the CLI. */

export function gitOf(ctx: TeamsContext): GitApi {
  if (!ctx.edges.git) throw new CallerError("git is not available in this process: spawn without a worktree");
  return ctx.edges.git;
}

/** The leader's work tree: the git top level of the project root. */
export async function leaderRepo(ctx: TeamsContext): Promise<string> {
  const repo = await gitOf(ctx).topLevel(ctx.projectRoot);
  if (!repo) {
    throw new CallerError(
      `The project '${ctx.projectRoot}' is not inside a git repository, so an agent cannot get a worktree: spawn it with worktree: false, or run \`git init\` and commit first.`,
    );
  }
  return repo;
}

/** Where every team's worktrees go: the plugin option `worktreeRoot` (relative: to the project root), else `<storage>/worktrees`. */
export function worktreesRoot(ctx: TeamsContext): string {
  return ctx.options.worktreeRoot
    ? path.resolve(ctx.projectRoot, ctx.options.worktreeRoot)
    : ctx.store.paths.worktreesDir;
}

/** The team's worktrees: its agents' (`<agent-name>`) and its spare (`.spare-<commit>`, specs/worktrees.md). */
export function teamWorktreesDir(ctx: TeamsContext, teamName: string): string {
  return path.join(worktreesRoot(ctx), teamName);
}

/** The directory for an agent's worktree: `<worktreeRoot or storage/worktrees>/<team>/<agent-name>`. */
export function worktreeDir(ctx: TeamsContext, teamName: string, agentName: string): string {
  // Never starting with ".": those names are the spare's and its leftovers'.
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(agentName)) {
    throw new CallerError(
      `Agent name ${JSON.stringify(agentName)} cannot name a worktree directory: use letters, digits, '.', '_' and '-' (not starting with '.' or '-'), or spawn without a worktree.`,
    );
  }
  return path.join(teamWorktreesDir(ctx, teamName), agentName);
}

export async function exists(ctx: TeamsContext, file: string): Promise<boolean> {
  return (await ctx.edges.files.kind(file, { follow: false })) !== undefined;
}

/**
 * Paths for an error or a warning: at most `max` of them, each cut to a readable length and with control characters
 * escaped (file names come from agents' commits), then how many more there are.
 */
export function namedPaths(paths: readonly string[], max = 10): string {
  const shown = paths.slice(0, max).map((file) => {
    const cut = file.length > 160 ? `${file.slice(0, 159)}…` : file;
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
    return /[\u0000-\u001f\u007f-\u009f]/.test(cut) ? JSON.stringify(cut) : cut;
  });
  const rest = paths.length - shown.length;
  return `${shown.join(", ")}${rest > 0 ? ` and ${rest} more` : ""}`;
}

import type { TeamsContext } from "../context.ts";
import { gitOf } from "./repo.ts";

/**
 * Folders whose content an install or a build makes again: losing them costs a rebuild, never work. Everything else
 * git ignores in an agent's worktree (a .env, a local database, notes, a cache of downloaded data) counts as work.
 */
const REBUILDABLE = new Set([
  "node_modules",
  "bower_components",
  ".pnpm-store",
  "dist",
  "build",
  "target",
  ".venv",
  "venv",
  "__pycache__",
  ".pytest_cache",
  ".mypy_cache",
  ".ruff_cache",
  ".tox",
  ".next",
  ".nuxt",
  ".svelte-kit",
  ".turbo",
  ".parcel-cache",
  ".gradle",
  "coverage",
  ".nyc_output",
  ".eggs",
  ".terraform",
  ".dart_tool",
  ".angular",
]);

/** Files tools make again: compiled Python, TypeScript's build info, Finder's folder settings. */
const REBUILDABLE_FILE = /(\.pyc|\.pyo|\.tsbuildinfo|^\.DS_Store)$/;

/**
 * What OpenCode's own dependency install writes into a `.opencode` config directory of the worktree (beside its
 * node_modules), made again at the next start there.
 */
const OPENCODE_INSTALL = new Set([
  "package.json",
  "package-lock.json",
  "bun.lock",
  "bun.lockb",
  ".gitignore",
]);

/** Whether an ignored entry of `git ls-files` (a directory ends in `/`) is rebuildable. */
export function isRebuildable(entry: string): boolean {
  const parts = entry.replace(/\/$/, "").split("/");
  const name = parts.at(-1) ?? "";
  if (parts.some((part) => REBUILDABLE.has(part) || part.endsWith(".egg-info"))) return true;
  if (parts.length >= 2 && parts.at(-2) === ".opencode" && OPENCODE_INSTALL.has(name)) return true;
  return !entry.endsWith("/") && REBUILDABLE_FILE.test(name);
}

/**
 * The ignored files in the worktree `dir` that are work (not rebuildable). A directory ignored as a whole is looked
 * into only when its own name is not rebuildable, so a node_modules of 100,000 files is one entry.
 */
export async function ignoredWork(ctx: TeamsContext, dir: string): Promise<string[]> {
  const git = gitOf(ctx);
  const entries = (await git.ignoredFiles(dir)).filter((entry) => !isRebuildable(entry));
  const folders = entries.filter((entry) => entry.endsWith("/"));
  const inside = (await git.ignoredFiles(dir, folders)).filter((entry) => !isRebuildable(entry));
  return [...entries.filter((entry) => !entry.endsWith("/")), ...inside];
}

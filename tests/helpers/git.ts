import { writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";

/** Run git in `dir` for a test; throws with git's words on failure. */
export function git(dir: string, ...args: string[]): string {
  const result = Bun.spawnSync(["git", "-C", dir, ...args], { stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) {
    throw new Error(`git ${args.join(" ")} failed: ${result.stderr.toString()}${result.stdout.toString()}`);
  }
  return result.stdout.toString().trim();
}

/** Make `dir` a repository on branch main with one commit holding `files` (path -> content). */
export async function initRepo(
  dir: string,
  files: Record<string, string> = { "app.txt": "v1\n" },
): Promise<string> {
  git(dir, "init", "--quiet", "--initial-branch=main");
  git(dir, "config", "user.name", "Test");
  git(dir, "config", "user.email", "test@example.invalid");
  git(dir, "config", "commit.gpgsign", "false");
  for (const [file, content] of Object.entries(files)) await writeFile(path.join(dir, file), content);
  git(dir, "add", "--", ...Object.keys(files));
  git(dir, "commit", "--quiet", "-m", "initial");
  return git(dir, "rev-parse", "HEAD");
}

/** Write `content` to `file` in `dir` and commit it there with `subject`. */
export async function commitFile(dir: string, file: string, content: string, subject: string): Promise<void> {
  await writeFile(path.join(dir, file), content);
  git(dir, "add", "--", file);
  git(dir, "commit", "--quiet", "-m", subject);
}

/**
 * Commit an e2e project's `opencode.json` (which loads the plugin and the model) and an `app.txt` of "v1": agents'
 * worktrees are checkouts of a commit, so what they load must be in it. `.opencode/` stays out of git.
 */
export function commitProjectForWorktrees(project: string): void {
  git(project, "config", "user.name", "e2e");
  git(project, "config", "user.email", "e2e@example.invalid");
  writeFileSync(path.join(project, "app.txt"), "v1\n");
  writeFileSync(path.join(project, ".git", "info", "exclude"), ".opencode/\n");
  git(project, "add", "--", "opencode.json", "app.txt");
  git(project, "commit", "--quiet", "-m", "app and config");
}

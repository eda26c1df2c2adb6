import { existsSync } from "node:fs";
import path from "node:path";
import type { CommitLine, GitApi, TreeChange, UnfinishedOperation, WorktreeEntry } from "./git-api.ts";

export class GitError extends Error {
  override name = "GitError";
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Variables that would point git at another repository than the one named by `-C`. */
const REDIRECTING_ENV = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_INDEX_FILE",
  "GIT_OBJECT_DIRECTORY",
  "GIT_COMMON_DIR",
];

function gitEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && !REDIRECTING_ENV.includes(key)) out[key] = value;
  }
  // Messages in one language (errors are matched and shown), and never a pager or a prompt for credentials.
  return { ...out, LC_ALL: "C", GIT_TERMINAL_PROMPT: "0", GIT_PAGER: "cat" };
}

/** NUL-separated output (`-z`) split into its fields. */
function fields(text: string): string[] {
  return text.split("\0").filter((field) => field !== "");
}

/**
 * A revision that came from a record or a caller (a commit id, a branch's tip): refused when git would read it as an
 * option (`--output=<file>` in a hand-edited agent record), before it reaches any command.
 */
function revision(rev: string): string {
  if (rev === "" || rev.startsWith("-"))
    throw new GitError(`not a revision: ${JSON.stringify(rev.slice(0, 80))}`);
  return rev;
}

/** The last worktree change started per repository in this process; the next one waits for it. */
const worktreeChanges = new Map<string, Promise<unknown>>();

function isWorktreeChange(args: string[]): boolean {
  return args[0] === "worktree" && args[1] !== "list";
}

/**
 * Worktree changes of one repository one at a time: a `git worktree add` reads every entry under
 * `.git/worktrees/`, and dies ("failed to read .git/worktrees/<x>/commondir") on one another add is still writing,
 * which concurrent spawns and the spare's refill made happen. Across processes (the leader's and the project
 * server's), the lock given to GitCli does the same.
 */
async function oneAtATime<T>(repo: string, run: () => Promise<T>): Promise<T> {
  const before = worktreeChanges.get(repo) ?? Promise.resolve();
  const mine = before.catch(() => {}).then(run);
  worktreeChanges.set(repo, mine);
  try {
    return await mine;
  } finally {
    if (worktreeChanges.get(repo) === mine) worktreeChanges.delete(repo);
  }
}

let niceArgv: string[] | undefined;

/** `nice -n 19` where there is a `nice` (looked up once), else nothing: the work runs at normal priority. */
function niceCommand(): string[] {
  if (niceArgv === undefined) {
    const bin = Bun.which("nice");
    niceArgv = bin ? [bin, "-n", "19"] : [];
  }
  return niceArgv;
}

/** `git worktree list --porcelain -z`: records of `key value` fields, each record ended by an empty field. */
function worktreeEntries(out: string): WorktreeEntry[] {
  const entries: WorktreeEntry[] = [];
  let current: WorktreeEntry | undefined;
  for (const field of out.split("\0")) {
    const space = field.indexOf(" ");
    const key = space < 0 ? field : field.slice(0, space);
    const value = space < 0 ? "" : field.slice(space + 1);
    if (key === "worktree") {
      current = { path: value, locked: false };
      entries.push(current);
    } else if (current && key === "HEAD") current.head = value;
    else if (current && key === "branch") current.branch = value.replace(/^refs\/heads\//, "");
    else if (current && key === "locked") current.locked = true;
  }
  return entries;
}

/** The real `git` binary, run with an argument vector (no shell). */
/** Literal pathspecs (a path holding `*` names that file only), in chunks that stay far below the argv limit. */
function* literalSpecChunks(paths: readonly string[]): Generator<string[]> {
  for (let i = 0; i < paths.length; i += 500)
    yield paths.slice(i, i + 500).map((file) => `:(literal)${file}`);
}

export class GitCli implements GitApi {
  private readonly env: Record<string, string>;
  constructor(
    private readonly bin = "git",
    env: NodeJS.ProcessEnv = process.env,
    /** Runs a worktree change while no other process makes one (the plugin's cross-process lock); none by default. */
    private readonly acrossProcesses: <T>(change: () => Promise<T>) => Promise<T> = (change) => change(),
  ) {
    this.env = gitEnv(env);
  }

  private async run(repo: string, args: string[], lowPriority = false): Promise<RunResult> {
    const nice = lowPriority ? niceCommand() : [];
    const proc = Bun.spawn([...nice, this.bin, "-C", repo, ...args], {
      env: this.env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    return { code, stdout, stderr };
  }

  /** Run and return stdout; a non-zero exit becomes a GitError naming the command and git's own words. */
  private async ok(repo: string, args: string[], lowPriority = false): Promise<string> {
    const result = await (isWorktreeChange(args)
      ? oneAtATime(repo, () => this.acrossProcesses(() => this.run(repo, args, lowPriority)))
      : this.run(repo, args, lowPriority));
    if (result.code !== 0) {
      const said = result.stderr.trim() || result.stdout.trim() || `exit code ${result.code}`;
      throw new GitError(`git ${args[0]} failed: ${said}`);
    }
    return result.stdout;
  }

  async topLevel(dir: string): Promise<string | undefined> {
    const result = await this.run(dir, ["rev-parse", "--show-toplevel"]);
    return result.code === 0 ? result.stdout.trim() || undefined : undefined;
  }

  async headCommit(dir: string): Promise<string | undefined> {
    const result = await this.run(dir, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
    return result.code === 0 ? result.stdout.trim() : undefined;
  }

  async currentBranch(dir: string): Promise<string | undefined> {
    const result = await this.run(dir, ["symbolic-ref", "--quiet", "--short", "HEAD"]);
    return result.code === 0 ? result.stdout.trim() : undefined;
  }

  async validBranchName(name: string): Promise<boolean> {
    // A leading "-" is a valid branch name but would read as an option to the commands below.
    if (name.startsWith("-")) return false;
    const result = await this.run(".", ["check-ref-format", "--branch", name]);
    return result.code === 0 && result.stdout.trim() === name;
  }

  async branchTip(repo: string, branch: string): Promise<string | undefined> {
    const result = await this.run(repo, [
      "rev-parse",
      "--verify",
      "--quiet",
      `refs/heads/${branch}^{commit}`,
    ]);
    return result.code === 0 ? result.stdout.trim() : undefined;
  }

  async addWorktree(repo: string, dir: string, branch: string, start: string): Promise<void> {
    await this.ok(repo, ["worktree", "add", "--quiet", "-b", branch, "--", dir, revision(start)]);
  }

  async addDetachedWorktree(
    repo: string,
    dir: string,
    commit: string,
    options: { lowPriority?: boolean } = {},
  ): Promise<void> {
    await this.ok(
      repo,
      ["worktree", "add", "--quiet", "--detach", "--", dir, revision(commit)],
      options.lowPriority,
    );
  }

  async moveWorktree(repo: string, from: string, to: string): Promise<void> {
    await this.ok(repo, ["worktree", "move", "--", from, to]);
  }

  async listWorktrees(repo: string): Promise<WorktreeEntry[]> {
    return worktreeEntries(await this.ok(repo, ["worktree", "list", "--porcelain", "-z"]));
  }

  async createBranch(repo: string, branch: string, commit: string): Promise<void> {
    // The empty old value: the ref must not exist yet, checked and created under git's ref lock.
    await this.ok(repo, [
      "update-ref",
      "-m",
      `branch: Created from ${commit}`,
      `refs/heads/${branch}`,
      revision(commit),
      "",
    ]);
  }

  async attachHead(dir: string, branch: string): Promise<void> {
    await this.ok(dir, ["symbolic-ref", "HEAD", `refs/heads/${branch}`]);
  }

  async checkoutWorktree(repo: string, dir: string, branch: string): Promise<void> {
    await this.ok(repo, ["worktree", "add", "--quiet", "--", dir, branch]);
  }

  async removeWorktree(repo: string, dir: string, options: { force?: boolean } = {}): Promise<void> {
    await this.ok(repo, ["worktree", "remove", ...(options.force ? ["--force"] : []), "--", dir]);
  }

  async pruneWorktrees(repo: string): Promise<void> {
    await this.ok(repo, ["worktree", "prune"]);
  }

  async deleteBranch(repo: string, branch: string, expectedTip: string): Promise<void> {
    await this.ok(repo, ["update-ref", "-d", `refs/heads/${branch}`, revision(expectedTip)]);
  }

  async changedFiles(dir: string): Promise<string[]> {
    const out = await this.ok(dir, ["status", "--porcelain=v1", "-z", "--untracked-files=all"]);
    const files: string[] = [];
    const parts = fields(out);
    for (let i = 0; i < parts.length; i++) {
      const entry = parts[i] as string;
      files.push(entry.slice(3));
      // A rename or copy is followed by its source path.
      if (entry[0] === "R" || entry[0] === "C") i++;
    }
    return files;
  }

  async isAncestor(repo: string, commit: string, of: string): Promise<boolean> {
    const result = await this.run(repo, ["merge-base", "--is-ancestor", revision(commit), revision(of)]);
    if (result.code > 1) throw new GitError(`git merge-base failed: ${result.stderr.trim()}`);
    return result.code === 0;
  }

  async commitsBetween(repo: string, base: string, tip: string): Promise<CommitLine[]> {
    const out = await this.ok(repo, [
      "log",
      "-z",
      "--format=%H %s",
      `${revision(base)}..${revision(tip)}`,
      "--",
    ]);
    return fields(out).map((line) => {
      const space = line.indexOf(" ");
      return { commit: line.slice(0, space), subject: line.slice(space + 1) };
    });
  }

  async diffStat(repo: string, base: string, tip: string): Promise<string> {
    return (await this.ok(repo, ["diff", "--stat", `${revision(base)}...${revision(tip)}`, "--"])).trimEnd();
  }

  async mergeTree(
    repo: string,
    ours: string,
    theirs: string,
  ): Promise<{ tree: string; conflicts: string[] }> {
    const result = await this.run(repo, [
      "merge-tree",
      "--write-tree",
      "--name-only",
      "--no-messages",
      "-z",
      revision(ours),
      revision(theirs),
    ]);
    // Exit 1: conflicts; the tree id comes first, then the conflicted paths.
    if (result.code > 1) throw new GitError(`git merge-tree failed: ${result.stderr.trim()}`);
    const [tree = "", ...conflicts] = fields(result.stdout);
    return { tree, conflicts: result.code === 1 ? [...new Set(conflicts)] : [] };
  }

  async treeChanges(repo: string, from: string, to: string): Promise<TreeChange[]> {
    const out = await this.ok(repo, [
      "diff-tree",
      "-r",
      "--no-renames",
      "--name-status",
      "-z",
      revision(from),
      revision(to),
      "--",
    ]);
    const parts = fields(out);
    const changes: TreeChange[] = [];
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const status = parts[i] as string;
      if (status === "A" || status === "D" || status === "M" || status === "T") {
        changes.push({ status, path: parts[i + 1] as string });
      }
    }
    return changes;
  }

  async stagedFiles(repo: string): Promise<string[]> {
    return fields(
      await this.ok(repo, ["diff", "--cached", "--no-renames", "--name-only", "-z", "HEAD", "--"]),
    );
  }

  async untrackedAt(repo: string, paths: readonly string[]): Promise<string[]> {
    const found: string[] = [];
    for (const specs of literalSpecChunks(paths)) {
      const args = ["ls-files", "-z", "--others", "--directory", "--no-empty-directory", "--", ...specs];
      found.push(...fields(await this.ok(repo, args)));
    }
    return [...new Set(found)];
  }

  async ignoredFiles(dir: string, under?: readonly string[]): Promise<string[]> {
    const args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--no-empty-directory"];
    if (!under) return fields(await this.ok(dir, [...args, "--directory"]));
    if (under.length === 0) return [];
    return fields(await this.ok(dir, [...args, "--", ...under.map((entry) => `:(literal)${entry}`)]));
  }

  async assumedUnchanged(repo: string, paths: readonly string[]): Promise<string[]> {
    const found: string[] = [];
    for (const specs of literalSpecChunks(paths)) {
      // `-v` tags an entry marked assume-unchanged with a lower-case letter.
      for (const entry of fields(await this.ok(repo, ["ls-files", "-z", "-v", "--", ...specs]))) {
        if (/^[a-z] /.test(entry)) found.push(entry.slice(2));
      }
    }
    return [...new Set(found)];
  }

  async unfinishedOperation(repo: string): Promise<UnfinishedOperation | undefined> {
    const names = [
      "rebase-merge",
      "rebase-apply",
      "rebase-apply/applying",
      "CHERRY_PICK_HEAD",
      "REVERT_HEAD",
    ];
    const out = await this.ok(repo, ["rev-parse", ...names.flatMap((name) => ["--git-path", name])]);
    const present = out
      .split("\n")
      .slice(0, names.length)
      .map((file) => existsSync(path.resolve(repo, file)));
    const [rebaseMerge, rebaseApply, applying, cherryPick, revert] = present;
    if (rebaseMerge || (rebaseApply && !applying)) return "rebase";
    if (rebaseApply) return "am";
    if (cherryPick) return "cherry-pick";
    if (revert) return "revert";
    return undefined;
  }

  async mergeInProgress(repo: string): Promise<boolean> {
    const result = await this.run(repo, ["rev-parse", "--verify", "--quiet", "MERGE_HEAD"]);
    return result.code === 0;
  }

  async merge(repo: string, commit: string, how: { squash: boolean; message: string }): Promise<void> {
    if (!/^[0-9a-f]{40,64}$/.test(commit)) throw new GitError(`not a full commit id: ${commit.slice(0, 80)}`);
    // The message as one `--message=` argument: text starting with "-" is never read as an option.
    const message = `--message=${how.message}`;
    try {
      if (how.squash) {
        await this.ok(repo, ["merge", "--squash", "--no-autostash", "--quiet", commit]);
        await this.ok(repo, ["commit", "--quiet", message]);
      } else {
        await this.ok(repo, ["merge", "--no-ff", "--no-autostash", "--no-edit", "--quiet", message, commit]);
      }
    } catch (error) {
      // Leave the checkout as it was: a half-done merge is worse than none.
      await this.run(repo, ["merge", "--abort"]);
      if (how.squash) await this.run(repo, ["reset", "--quiet", "--merge"]);
      throw error;
    }
  }
}

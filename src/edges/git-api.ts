/** A commit on an agent's branch, as agent-diff lists it. */
export interface CommitLine {
  commit: string;
  subject: string;
}

/** A path that differs between two trees: `A` added, `D` deleted, `M` modified, `T` type changed (file, link, submodule). */
export interface TreeChange {
  status: "A" | "D" | "M" | "T";
  path: string;
}

/** A git operation stopped half-way in a checkout, waiting for `--continue` or `--abort`. */
export type UnfinishedOperation = "rebase" | "am" | "cherry-pick" | "revert";

/** One worktree of a repository, as `git worktree list --porcelain` describes it. */
export interface WorktreeEntry {
  /** Its directory, as git recorded it (symlinks resolved). */
  path: string;
  /** Its checked-out commit; absent in a worktree without one (a bare repository's entry). */
  head?: string;
  /** Its branch (`refs/heads/...` without the prefix); absent on a detached HEAD. */
  branch?: string;
  /** Locked (`git worktree lock`, or an add still running or killed while it ran): git will not move it. */
  locked: boolean;
}

/**
 * The git commands opencode-teams runs, behind an interface like the tmux edge. Every path and ref is passed as its
 * own argument after `--` or a validated ref, never through a shell. `repo` is any directory inside a work tree.
 */
export interface GitApi {
  /** The top of the work tree holding `dir`, or undefined when `dir` is not inside a git work tree. */
  topLevel(dir: string): Promise<string | undefined>;
  /** The commit checked out in `dir`, or undefined when it has none yet (a repository without commits). */
  headCommit(dir: string): Promise<string | undefined>;
  /** The branch checked out in `dir`, or undefined on a detached HEAD. */
  currentBranch(dir: string): Promise<string | undefined>;
  /** Whether `name` is a valid branch name (`git check-ref-format --branch`). */
  validBranchName(name: string): Promise<boolean>;
  /** The commit a local branch points at, or undefined when there is no such branch. */
  branchTip(repo: string, branch: string): Promise<string | undefined>;
  /** A new worktree at `dir` on a new branch starting at `start`. */
  addWorktree(repo: string, dir: string, branch: string, start: string): Promise<void>;
  /**
   * A new worktree at `dir` with a detached HEAD at `commit`. `lowPriority`: git runs under `nice`, for work nobody
   * waits for (the spare worktree).
   */
  addDetachedWorktree(
    repo: string,
    dir: string,
    commit: string,
    options?: { lowPriority?: boolean },
  ): Promise<void>;
  /**
   * Move a worktree (`git worktree move`, a rename of its directory). Fails when `from` is not a worktree of this
   * repository, is locked, or `to` exists as a file; when `to` is an existing directory git moves `from` INTO it, so
   * callers make sure it does not exist.
   */
  moveWorktree(repo: string, from: string, to: string): Promise<void>;
  /** Every worktree of the repository, the main one first (`git worktree list --porcelain -z`). */
  listWorktrees(repo: string): Promise<WorktreeEntry[]>;
  /** A new branch at `commit`; fails when the branch exists already (never moves one). */
  createBranch(repo: string, branch: string, commit: string): Promise<void>;
  /**
   * Put the worktree of `dir` on `branch` without touching its files or index (`git symbolic-ref HEAD`): for a
   * detached worktree whose commit is the branch's tip, the same as having checked the branch out.
   */
  attachHead(dir: string, branch: string): Promise<void>;
  /** A new worktree at `dir` checking out an existing branch. */
  checkoutWorktree(repo: string, dir: string, branch: string): Promise<void>;
  /** Remove a clean worktree (`git worktree remove`, without --force: git itself refuses a dirty one). */
  /** `force`: also one with changes or submodules (only for a checkout nobody has used: a spare we just made). */
  removeWorktree(repo: string, dir: string, options?: { force?: boolean }): Promise<void>;
  /** Forget worktrees whose directory is gone. */
  pruneWorktrees(repo: string): Promise<void>;
  /** Delete a branch, only while it still points at `expectedTip` (so a commit made meanwhile is never lost). */
  deleteBranch(repo: string, branch: string, expectedTip: string): Promise<void>;
  /** Paths with uncommitted changes in the work tree of `dir`, untracked files included (ignored ones not). */
  changedFiles(dir: string): Promise<string[]>;
  /** Whether `commit` is `of` or one of its ancestors. */
  isAncestor(repo: string, commit: string, of: string): Promise<boolean>;
  /** Commits reachable from `tip` but not from `base`, newest first. */
  commitsBetween(repo: string, base: string, tip: string): Promise<CommitLine[]>;
  /** `git diff --stat` of what `tip` changed since its merge base with `base`. */
  diffStat(repo: string, base: string, tip: string): Promise<string>;
  /**
   * What merging `theirs` into `ours` gives, computed without touching any work tree or index (`git merge-tree
   * --write-tree`): the resulting tree, and the paths that would conflict (empty when it merges cleanly).
   */
  mergeTree(repo: string, ours: string, theirs: string): Promise<{ tree: string; conflicts: string[] }>;
  /** Every path that differs between two commits or trees (renames as a deletion and an addition). */
  treeChanges(repo: string, from: string, to: string): Promise<TreeChange[]>;
  /** Paths whose staged content differs from HEAD (`git diff --cached`). */
  stagedFiles(repo: string): Promise<string[]>;
  /**
   * What git does not track at or under each of `paths` (relative to the top of `repo`'s work tree), ignored files
   * included: a file, or a directory holding nothing tracked as one entry ending in `/`. Empty directories not.
   */
  untrackedAt(repo: string, paths: readonly string[]): Promise<string[]>;
  /**
   * Ignored files in the work tree of `dir`: a directory ignored as a whole is one entry ending in `/`; with `under`,
   * every ignored file at or under those paths one by one.
   */
  ignoredFiles(dir: string, under?: readonly string[]): Promise<string[]>;
  /**
   * Which of `paths` (relative to the top of `repo`'s work tree) the index marks assume-unchanged (`git update-index
   * --assume-unchanged`): git does not look at their files, so `git status` hides an edit in them.
   */
  assumedUnchanged(repo: string, paths: readonly string[]): Promise<string[]>;
  /** The rebase, am, cherry-pick or revert `repo` is in the middle of, or undefined (a merge: mergeInProgress). */
  unfinishedOperation(repo: string): Promise<UnfinishedOperation | undefined>;
  /** Whether `repo` is in the middle of a merge (MERGE_HEAD exists). */
  mergeInProgress(repo: string): Promise<boolean>;
  /**
   * Merge `commit` (a full commit id, never a branch name: what was checked is what is merged) into the branch
   * checked out in `repo`: a merge commit, or a squashed single commit. On failure the checkout is put back
   * (`git merge --abort`, `git reset --merge`) and a GitError with git's words is thrown: callers look at what
   * the checkout holds then.
   */
  merge(repo: string, commit: string, how: { squash: boolean; message: string }): Promise<void>;
}

import path from "node:path";
import type { CommitLine, TreeChange } from "../../edges/git-api.ts";
import type { TeamsContext } from "../context.ts";
import { gitOf, namedPaths } from "./repo.ts";

/**
 * Everything merge-agent checks in the leader's checkout before it merges, read once: the merge itself uses these
 * commit ids (never a branch name), so what was checked is what is merged.
 */
export interface MergePlan {
  /** The leader's current branch. */
  into: string;
  /** The leader's HEAD when checked. */
  head: string;
  /** The agent's commit to merge: its branch's tip, read once. */
  tip: string;
  /** The commits brought in, newest first. */
  merged: CommitLine[];
  /** What the merge creates, changes and deletes in the checkout (HEAD against the merged tree). */
  changes: TreeChange[];
  /** The tree the checked merge gives (`git merge-tree`): what the merge's commit should hold. */
  tree: string;
}

export type Preflight = { plan: MergePlan } | { refused: string };

const NOTHING_CHANGED = "Nothing was changed.";

/**
 * Whether the leader's checkout `repo` can take `tip` (the tip of the agent's `branch`) with nothing of the leader's
 * at risk: a current branch with a commit, no merge, rebase, am, cherry-pick or revert in progress, nothing staged
 * (a squash would commit it, a failed commit would lose it), no conflict, and nothing uncommitted (hidden by
 * assume-unchanged included), untracked or ignored at a path the merge writes or on the way to one. Reads only: nothing is changed whatever the answer.
 */
export async function mergePreflight(
  ctx: TeamsContext,
  repo: string,
  branch: string,
  tip: string,
): Promise<Preflight> {
  const git = gitOf(ctx);
  const [into, head] = await Promise.all([git.currentBranch(repo), git.headCommit(repo)]);
  // First: a rebase detaches HEAD, and "check out a branch" would be the wrong advice in the middle of one. git's own
  // merge refuses only some of these, and a commit made meanwhile would conclude a revert unseen.
  const unfinished = await git.unfinishedOperation(repo);
  if (unfinished) {
    return refuse(
      `The leader's checkout ${repo} is in the middle of ${unfinished === "am" ? "an am session" : `a ${unfinished}`}: finish it (\`git ${unfinished} --continue\`) or abort it (\`git ${unfinished} --abort\`) first. ${NOTHING_CHANGED}`,
    );
  }
  if (!into) {
    return refuse(
      `The leader's checkout ${repo} has no current branch (detached HEAD): check out the branch to merge into first. ${NOTHING_CHANGED}`,
    );
  }
  if (!head) {
    return refuse(
      `The leader's branch ${into} in ${repo} has no commit yet: commit on it first, or check out a branch that has commits. ${NOTHING_CHANGED}`,
    );
  }
  if (await git.mergeInProgress(repo)) {
    return refuse(
      `The leader's checkout ${repo} is in the middle of a merge: conclude it (\`git commit\`) or abort it (\`git merge --abort\`) first. ${NOTHING_CHANGED}`,
    );
  }
  const staged = await git.stagedFiles(repo);
  if (staged.length > 0) {
    return refuse(
      `The leader's checkout has staged changes (the index differs from HEAD): ${namedPaths(staged)}. The merge's commit would take them in, and a failed commit would lose them. Commit them (\`git commit\`) or unstage them (\`git restore --staged -- <path>\`: the edits stay in the files), then merge again. ${NOTHING_CHANGED}`,
    );
  }
  const merged = await git.commitsBetween(repo, head, tip);
  if (merged.length === 0)
    return refuse(`Branch '${branch}' has nothing that ${into} does not already have.`);
  const { tree, conflicts } = await git.mergeTree(repo, head, tip);
  if (conflicts.length > 0) {
    return refuse(
      `Merging ${branch} into ${into} would conflict in: ${namedPaths(conflicts)}. ${NOTHING_CHANGED} Resolve it by hand (\`git merge ${tip}\`), or ask the agent to rebase its branch on ${into} (resume it with that request) and merge again.`,
    );
  }
  const changes = await git.treeChanges(repo, head, tree);
  const atRisk = await leaderFilesAtRisk(ctx, repo, changes);
  if (atRisk) return refuse(`${atRisk} ${NOTHING_CHANGED}`);
  return { plan: { into, head, tip, merged, changes, tree } };
}

function refuse(text: string): Preflight {
  return { refused: text };
}

/** Why the merge's writes would hit something of the leader's, or undefined when they hit nothing. */
async function leaderFilesAtRisk(
  ctx: TeamsContext,
  repo: string,
  changes: readonly TreeChange[],
): Promise<string | undefined> {
  const inTheWay = await untrackedInTheWay(ctx, repo, changes);
  const involved = new Set(changes.map((change) => change.path));
  const blocked = new Set(inTheWay);
  const dirty = (await gitOf(ctx).changedFiles(repo)).filter(
    (file) => involved.has(file) && !blocked.has(file),
  );
  const found: string[] = [];
  const hidden = await gitOf(ctx).assumedUnchanged(
    repo,
    changes.filter((change) => change.status !== "A").map((change) => change.path),
  );
  if (hidden.length > 0) {
    found.push(
      `The leader's checkout marks files the merge changes as assume-unchanged (\`git update-index --assume-unchanged\`), so git does not see a local edit in them and the merge would overwrite it: ${namedPaths(hidden)}. Unmark them (\`git update-index --no-assume-unchanged -- <path>\`), commit or set aside what you changed, then merge again.`,
    );
  }
  if (dirty.length > 0) {
    found.push(
      `The leader's checkout has uncommitted changes to files the merge touches: ${namedPaths(dirty)}. Commit or set them aside first, then merge again.`,
    );
  }
  if (inTheWay.length > 0) {
    found.push(
      `The leader's checkout has files git does not track (untracked or ignored, such as a .env or a local database) where the merge writes, which git would overwrite or delete: ${namedPaths(inTheWay)}. Move them out of the way (or commit them), then merge again.`,
    );
  }
  return found.length > 0 ? found.join(" ") : undefined;
}

/**
 * Untracked and ignored entries the merge would overwrite or delete: anything at or under a path it writes (a file
 * replacing a directory deletes all under it), and any file or link where it needs a directory (a directory
 * replacing a file). A tracked file the merge deletes is no obstacle: the uncommitted-changes check covers it.
 */
async function untrackedInTheWay(
  ctx: TeamsContext,
  repo: string,
  changes: readonly TreeChange[],
): Promise<string[]> {
  const written = changes.filter((change) => change.status !== "D").map((change) => change.path);
  const deleted = new Set(changes.filter((change) => change.status === "D").map((change) => change.path));
  const directories = new Set<string>();
  for (const file of written) {
    for (
      let dir = path.posix.dirname(file);
      dir !== "." && !directories.has(dir);
      dir = path.posix.dirname(dir)
    ) {
      directories.add(dir);
    }
  }
  const notDirectories = await Promise.all(
    [...directories]
      .filter((dir) => !deleted.has(dir))
      .map(async (dir) => {
        const kind = await ctx.edges.files.kind(path.join(repo, dir), { follow: false });
        return kind !== undefined && kind !== "directory" ? [dir] : [];
      }),
  );
  const untracked = await gitOf(ctx).untrackedAt(repo, written);
  return [...new Set([...untracked, ...notDirectories.flat()])].sort();
}

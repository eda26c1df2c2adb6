import type { CommitLine } from "../../edges/git-api.ts";
import { LockTimeoutError } from "../../state/lock.ts";
import { assertAgentId, assertTeamName } from "../../state/paths.ts";
import type { AgentState, AgentWorktree } from "../../state/schemas.ts";
import { agentLabel } from "../agents/agent-words.ts";
import { readAgentOrFail } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, errorText, fail, type OpResult } from "../result.ts";
import { loadTeam, requireLeader, requireMember } from "../team/identity.ts";
import { type MergePlan, mergePreflight } from "./merge-preflight.ts";
import { exists, gitOf, leaderRepo, namedPaths } from "./repo.ts";
import { refillSpare } from "./spare.ts";
import { removeIfUnchanged } from "./worktrees.ts";

export interface AgentDiffInput {
  teamName: string;
  agentId: string;
}

export interface AgentDiffOutput {
  agentId: string;
  name: string;
  status: AgentState["status"];
  worktree: AgentWorktree;
  /** false when the worktree directory is gone (its branch may still hold the work). */
  worktreeExists: boolean;
  /** Commits on the branch that its base does not have, newest first. */
  ahead: number;
  commits: CommitLine[];
  diffStat: string;
  /** Files changed in the worktree and not committed: merge-agent does not bring these home. */
  uncommitted: string[];
}

/** An agent of the team with a worktree whose branch still exists, and that branch's tip. */
export async function agentBranch(
  ctx: TeamsContext,
  input: AgentDiffInput,
): Promise<{ agent: AgentState & { worktree: AgentWorktree }; repo: string; tip: string }> {
  const team = await loadTeam(ctx, input.teamName);
  const agent = await readAgentOrFail(ctx, team, input.agentId);
  const { worktree } = agent;
  if (!worktree) {
    throw new CallerError(
      `${agentLabel(agent)} works in ${agent.cwd}, not in a worktree of its own: its changes are already in that checkout (see git status there).`,
    );
  }
  const repo = await leaderRepo(ctx);
  const tip = await gitOf(ctx).branchTip(repo, worktree.branch);
  if (!tip) {
    throw new CallerError(
      `Branch '${worktree.branch}' of agent '${agent.name}' no longer exists (merged and removed, or deleted by hand): there is nothing left to diff or merge.`,
    );
  }
  return { agent: { ...agent, worktree }, repo, tip };
}

/** What an agent's worktree holds now: commits on its branch beyond its base, diffstat, uncommitted files. */
export async function worktreeContents(
  ctx: TeamsContext,
  worktree: AgentWorktree,
  repo: string,
  tip: string,
): Promise<Pick<AgentDiffOutput, "worktreeExists" | "ahead" | "commits" | "diffStat" | "uncommitted">> {
  const git = gitOf(ctx);
  const worktreeExists = await exists(ctx, worktree.path);
  const [commits, diffStat, uncommitted] = await Promise.all([
    git.commitsBetween(repo, worktree.base, tip),
    git.diffStat(repo, worktree.base, tip),
    worktreeExists ? git.changedFiles(worktree.path) : Promise.resolve([]),
  ]);
  return { worktreeExists, ahead: commits.length, commits, diffStat, uncommitted };
}

/** agent-diff: any member. What an agent's branch holds beyond its base, and what it has not committed. */
export async function agentDiff(
  ctx: TeamsContext,
  input: AgentDiffInput,
  callerSessionId: string,
): Promise<OpResult<AgentDiffOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  await requireMember(ctx, await loadTeam(ctx, input.teamName), callerSessionId);
  const { agent, repo, tip } = await agentBranch(ctx, input);
  return {
    success: true,
    agentId: agent.agentId,
    name: agent.name,
    status: agent.status,
    worktree: agent.worktree,
    ...(await worktreeContents(ctx, agent.worktree, repo, tip)),
  };
}

export interface MergeAgentInput {
  teamName: string;
  agentId: string;
  strategy?: "merge" | "squash";
  message?: string;
  /** Merge the branch of an agent that is still running (what it committed so far). */
  force?: boolean;
}

export interface MergeAgentOutput {
  branch: string;
  into: string;
  strategy: "merge" | "squash";
  /** The leader's HEAD after the merge. */
  commit: string;
  merged: CommitLine[];
  files: string[];
  /** The agent's worktree and branch were removed (all of its work is home now). */
  worktreeRemoved: boolean;
  warnings?: string[];
}

/**
 * merge-agent: leader only. Brings an agent's branch into the leader's current branch, in the leader's checkout.
 * The branch's tip is read once, under the merge lock; every check and the merge use that commit. Refused with
 * nothing changed while the agent runs (unless force) or when mergePreflight finds the checkout cannot take it; a
 * merge that fails anyway is put back, and the answer says what the checkout holds.
 */
export async function mergeAgent(
  ctx: TeamsContext,
  input: MergeAgentInput,
  callerSessionId: string,
): Promise<OpResult<MergeAgentOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  if (input.message?.includes("\0")) {
    return fail("The message contains a NUL character, which git cannot take: remove it and merge again.");
  }
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can merge an agent's work");
  // One merge at a time in the leader's checkout: git's own index lock would fail the second half-way.
  return ctx.store
    .withMergeLock(() => mergeLocked(ctx, input))
    .catch((error: unknown) => {
      if (!(error instanceof LockTimeoutError)) throw error;
      return fail(
        `Another merge into this checkout is still running (${errorText(error)}). Nothing was changed: merge again once it is done.`,
      );
    });
}

async function mergeLocked(ctx: TeamsContext, input: MergeAgentInput): Promise<OpResult<MergeAgentOutput>> {
  const { agent, repo, tip } = await agentBranch(ctx, input);
  if (agent.status !== "terminated" && !input.force) {
    return fail(
      `Agent '${agent.name}' is ${agent.status}: it may still change its branch. Wait for it to complete (or kill it), or pass force: true to merge what it has committed so far.`,
    );
  }
  const { branch } = agent.worktree;
  const checked = await mergePreflight(ctx, repo, branch, tip).catch((error: unknown) => {
    if (error instanceof CallerError) throw error;
    return {
      refused: `Checking the merge of ${branch} failed: ${gitWords(error)}. Nothing was changed: look at \`git status\` in ${repo}, then merge again.`,
    };
  });
  if ("refused" in checked) return fail(checked.refused);
  const { plan } = checked;
  const strategy = input.strategy ?? "merge";
  if (strategy === "squash" && plan.changes.length === 0) {
    return fail(
      `The commits of ${branch} change nothing in ${plan.into} (their changes are there already): there is nothing to squash. Nothing was changed; use strategy "merge" to record them, or leave them.`,
    );
  }
  const text = input.message?.trim() || `Merge ${branch} (agent ${agent.name})`;
  try {
    await gitOf(ctx).merge(repo, plan.tip, { squash: strategy === "squash", message: text });
  } catch (error) {
    return fail(await afterFailedMerge(ctx, repo, { branch, strategy, plan }, error));
  }
  return mergeDone(ctx, input.teamName, agent, repo, { strategy, plan });
}

async function mergeDone(
  ctx: TeamsContext,
  teamName: string,
  agent: AgentState & { worktree: AgentWorktree },
  repo: string,
  done: { strategy: "merge" | "squash"; plan: MergePlan },
): Promise<OpResult<MergeAgentOutput>> {
  const git = gitOf(ctx);
  const { branch } = agent.worktree;
  const { into, head, tip, merged, changes } = done.plan;
  const commit = (await git.headCommit(repo)) ?? head;
  const differs = await resultDiffers(ctx, repo, done.plan, commit);
  const warnings = differs
    ? [differs]
    : agent.status === "terminated"
      ? await removeMerged(ctx, agent.worktree, tip)
      : [];
  const worktreeRemoved = !(await git.branchTip(repo, branch));
  ctx.log("info", `merged ${branch} into ${into}`, {
    agentId: agent.agentId,
    strategy: done.strategy,
    commit,
  });
  // HEAD moved: the team's spare is of the old commit now, and the next spawn would check out while the leader waits.
  refillSpare(ctx, teamName);
  return {
    success: true,
    branch,
    into,
    strategy: done.strategy,
    commit,
    merged,
    files: changes.map((change) => change.path),
    worktreeRemoved,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/**
 * Why the merge's commit does not hold the tree that was checked, or undefined when it does. git's merge reads
 * options the check does not see (`branch.<name>.mergeOptions` such as `-s ours`, which merges none of the branch's
 * changes) and hooks may change what is committed: then the agent's branch may be all that holds its work, so it
 * is kept.
 */
async function resultDiffers(
  ctx: TeamsContext,
  repo: string,
  plan: MergePlan,
  commit: string,
): Promise<string | undefined> {
  const changed = await gitOf(ctx)
    .treeChanges(repo, plan.tree, commit)
    .catch(() => undefined);
  if (changed?.length === 0) return undefined;
  const where = changed
    ? `in ${namedPaths(changed.map((change) => change.path))}`
    : "(it could not be compared)";
  return `The commit ${commit.slice(0, 12)} does not hold what the checked merge gives ${where}: git's merge read options the check does not see (\`git config branch.${plan.into}.mergeOptions\`: a \`-s ours\` there merges none of the branch's changes), or a hook changed the commit. Look at \`git show --stat ${commit.slice(0, 12)}\`. The agent's worktree and branch are kept: merge again, or take what is missing from ${plan.tip.slice(0, 12)}.`;
}

/** git's own words from a failure, cut to a readable length. */
function gitWords(error: unknown): string {
  const text = errorText(error).trim();
  return text.length > 1500 ? `${text.slice(0, 1500)}… (cut)` : text;
}

/**
 * What a merge that failed (a hook, signing, anything git refused) left: the edge put the checkout back; this looks
 * at what it holds now and says so, with the next move.
 */
async function afterFailedMerge(
  ctx: TeamsContext,
  repo: string,
  tried: { branch: string; strategy: "merge" | "squash"; plan: MergePlan },
  error: unknown,
): Promise<string> {
  const { branch, strategy, plan } = tried;
  const git = gitOf(ctx);
  const failed = `Merging ${branch} (commit ${plan.tip.slice(0, 12)}) into ${plan.into} failed: ${gitWords(error)}.`;
  const byHand =
    strategy === "squash"
      ? `\`git merge --squash ${plan.tip}\` then \`git commit\``
      : `\`git merge --no-ff ${plan.tip}\``;
  const [head, inMerge, staged] = await Promise.all([
    git.headCommit(repo),
    git.mergeInProgress(repo),
    git.stagedFiles(repo),
  ]).catch(() => [undefined, true, [] as string[]] as const);
  if (head === plan.head && !inMerge && staged.length === 0) {
    return `${failed} The checkout was put back as it was: HEAD ${plan.head.slice(0, 12)} on ${plan.into}, nothing staged, your uncommitted and untracked files untouched; the agent's branch and worktree are kept. Fix what git said (a hook or commit signing: run ${byHand} by hand to see it), then merge again.`;
  }
  if (head !== plan.head) {
    return `${failed} HEAD is now ${head?.slice(0, 12) ?? "unreadable"}, not ${plan.head.slice(0, 12)} as checked: look at \`git log -1\` and \`git status\` in ${repo} before anything else. The agent's branch and worktree are kept.`;
  }
  const left = inMerge ? "a merge in progress" : `staged changes (${namedPaths(staged)})`;
  return `${failed} Putting the checkout back did not complete: it holds ${left}. Run \`git merge --abort\` (or \`git reset --merge\`) in ${repo} to go back to ${plan.head.slice(0, 12)}: both keep your uncommitted changes to other files. The agent's branch and worktree are kept.`;
}

/**
 * After the merge the branch's work is home: a squash leaves the branch outside the leader's history, so it is
 * recorded as merged by pointing the removal at the tip that was merged.
 */
async function removeMerged(ctx: TeamsContext, worktree: AgentWorktree, tip: string): Promise<string[]> {
  if (ctx.options.keepWorktrees) return [];
  return removeIfUnchanged(ctx, worktree, tip);
}

import type { CommitLine } from "../../edges/git-api.ts";
import { assertAgentId, assertTeamName } from "../../state/paths.ts";
import type { AgentState, AgentWorktree } from "../../state/schemas.ts";
import { agentLabel } from "../agents/agent-words.ts";
import { readAgentOrFail } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, fail, type OpResult } from "../result.ts";
import { loadTeam, requireLeader, requireMember } from "../team/identity.ts";
import { exists, gitOf, leaderRepo } from "./repo.ts";
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

/** Why the leader's checkout cannot take the merge now, or undefined when it can. */
async function checkoutRefusal(
  ctx: TeamsContext,
  repo: string,
  files: readonly string[],
): Promise<string | undefined> {
  const git = gitOf(ctx);
  if (await git.mergeInProgress(repo)) {
    return `The leader's checkout ${repo} is in the middle of a merge: conclude it (\`git commit\`) or abort it (\`git merge --abort\`) first. Nothing was changed.`;
  }
  const involved = new Set(files);
  const dirty = (await git.changedFiles(repo)).filter((file) => involved.has(file));
  if (dirty.length > 0) {
    return `The leader's checkout has uncommitted changes to files the merge touches: ${dirty.join(", ")}. Commit or set them aside first, then merge again. Nothing was changed.`;
  }
  return undefined;
}

/**
 * merge-agent: leader only. Brings an agent's branch into the leader's current branch, in the leader's checkout.
 * Refused with nothing changed while the agent runs (unless force), when the checkout has uncommitted changes to the
 * files involved, or when the merge would conflict (found without touching the checkout: the files are listed).
 */
export async function mergeAgent(
  ctx: TeamsContext,
  input: MergeAgentInput,
  callerSessionId: string,
): Promise<OpResult<MergeAgentOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can merge an agent's work");
  const { agent, repo } = await agentBranch(ctx, input);
  if (agent.status !== "terminated" && !input.force) {
    return fail(
      `Agent '${agent.name}' is ${agent.status}: it may still change its branch. Wait for it to complete (or kill it), or pass force: true to merge what it has committed so far.`,
    );
  }
  // One merge at a time in the leader's checkout: git's own index lock would fail the second half-way.
  return ctx.store.withMergeLock(() => mergeLocked(ctx, input, repo));
}

async function mergeLocked(
  ctx: TeamsContext,
  input: MergeAgentInput,
  repo: string,
): Promise<OpResult<MergeAgentOutput>> {
  const git = gitOf(ctx);
  // Read again under the lock: a merge just before this one may have removed the branch.
  const { agent, tip } = await agentBranch(ctx, input);
  const into = await git.currentBranch(repo);
  const head = await git.headCommit(repo);
  if (!into || !head) {
    return fail(
      `The leader's checkout ${repo} has no current branch (detached HEAD): check out the branch to merge into first.`,
    );
  }
  const { branch } = agent.worktree;
  const merged = await git.commitsBetween(repo, head, tip);
  if (merged.length === 0) return fail(`Branch '${branch}' has nothing that ${into} does not already have.`);
  const files = await git.filesChanged(repo, head, tip);
  const refused = await checkoutRefusal(ctx, repo, files);
  if (refused) return fail(refused);
  const conflicts = await git.mergeConflicts(repo, head, tip);
  if (conflicts.length > 0) {
    return fail(
      `Merging ${branch} into ${into} would conflict in: ${conflicts.join(", ")}. Nothing was changed. Resolve it by hand (\`git merge ${branch}\`), or ask the agent to rebase its branch on ${into} (resume it with that request) and merge again.`,
    );
  }
  const strategy = input.strategy ?? "merge";
  const text = input.message?.trim() || `Merge ${branch} (agent ${agent.name})`;
  await git.merge(repo, branch, { squash: strategy === "squash", message: text });
  const commit = (await git.headCommit(repo)) ?? head;
  const warnings = agent.status === "terminated" ? await removeMerged(ctx, agent.worktree, tip) : [];
  const worktreeRemoved = !(await git.branchTip(repo, branch));
  ctx.log("info", `merged ${branch} into ${into}`, { agentId: agent.agentId, strategy, commit });
  // HEAD moved: the team's spare is of the old commit now, and the next spawn would check out while the leader waits.
  refillSpare(ctx, input.teamName);
  return {
    success: true,
    branch,
    into,
    strategy,
    commit,
    merged,
    files,
    worktreeRemoved,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/**
 * After the merge the branch's work is home: a squash leaves the branch outside the leader's history, so it is
 * recorded as merged by pointing the removal at the tip that was merged.
 */
async function removeMerged(ctx: TeamsContext, worktree: AgentWorktree, tip: string): Promise<string[]> {
  if (ctx.options.keepWorktrees) return [];
  return removeIfUnchanged(ctx, worktree, tip);
}

import path from "node:path";
import type { GitApi } from "../../edges/git-api.ts";
import type { AgentState, AgentWorktree, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, errorText } from "../result.ts";
import { ignoredWork } from "./ignored-work.ts";
import { exists, gitOf, leaderRepo, namedPaths, worktreeDir, worktreesRoot } from "./repo.ts";
import { claimSpare } from "./spare.ts";

/** What spawn-agent settled before launching: the worktree is made once the agent's name is known. */
export interface WorktreePlan {
  /** Top of the leader's work tree. */
  repo: string;
  /** The leader's HEAD commit: the new branch starts here. */
  base: string;
  /** The branch asked for; absent: `teams/<team>/<agent-name>`. */
  branch?: string;
  /** The agent's cwd relative to `repo`, taken into the worktree. */
  cwdInRepo: string;
}

/** How launchAgent gets an agent's worktree: a new one (spawn) or the agent's own again (resume). */
export type WorktreeRequest = { create: WorktreePlan } | { reenter: AgentWorktree };

/**
 * spawn-agent's `worktree` (else the team's `worktrees` default) turned into a plan, checked before anything is
 * made: a git repository with a commit to start from, and a valid branch name when one is given.
 */
export async function planWorktree(
  ctx: TeamsContext,
  team: TeamConfig,
  requested: boolean | string | undefined,
  cwd: string,
): Promise<WorktreePlan | undefined> {
  const wanted = requested ?? team.worktrees ?? false;
  if (wanted === false) return undefined;
  const git = gitOf(ctx);
  const repo = await leaderRepo(ctx);
  const base = await git.headCommit(repo);
  if (!base) {
    throw new CallerError(
      `The repository '${repo}' has no commit yet: a worktree starts from the leader's HEAD. Commit first, or spawn with worktree: false.`,
    );
  }
  const plan: WorktreePlan = { repo, base, cwdInRepo: path.relative(repo, cwd) };
  if (typeof wanted === "string") plan.branch = await checkedBranch(git, wanted.trim());
  return plan;
}

/**
 * Names git accepts as a branch that then mean something else to the git commands people type: `@` is HEAD,
 * `refs/heads/x` would become `refs/heads/refs/heads/x`, `heads/x` or `tags/x` shadow other refs, `FETCH_HEAD` and
 * the like are git's own pseudo-refs.
 */
const MISLEADING_BRANCH = /^(?:@|(?:[A-Z]+_)*HEAD|(?:refs|heads|tags|remotes)\/.*)$/;

async function checkedBranch(git: GitApi, branch: string): Promise<string> {
  if (MISLEADING_BRANCH.test(branch) || !(await git.validBranchName(branch))) {
    throw new CallerError(
      `Invalid branch name ${JSON.stringify(branch.slice(0, 100))} for the worktree: use a valid git branch name (see \`git check-ref-format\`), not "@", a pseudo-ref like FETCH_HEAD or a name starting with refs/, heads/, tags/ or remotes/ (a branch name is the part after refs/heads/), e.g. "feature/login", or worktree: true for teams/<team>/<agent>.`,
    );
  }
  return branch;
}

export interface MadeWorktree {
  worktree: AgentWorktree;
  /** The agent's working directory inside it. */
  cwd: string;
  /** Undo (spawn rollback): remove the worktree and the branch it made; resume made nothing to undo. */
  undo?: () => Promise<void>;
}

/** A new worktree on a new branch from the plan's base. Refused when the branch or the directory exists already. */
export async function createWorktree(
  ctx: TeamsContext,
  plan: WorktreePlan,
  teamName: string,
  agentName: string,
): Promise<MadeWorktree> {
  const git = gitOf(ctx);
  const dir = worktreeDir(ctx, teamName, agentName);
  const branch = plan.branch ?? (await checkedBranch(git, `teams/${teamName}/${agentName}`));
  if (await git.branchTip(plan.repo, branch)) {
    throw new CallerError(
      `Branch '${branch}' already exists: pass another branch name as worktree, another agent name, or delete the branch (\`git branch -D ${branch}\`) if its work is not needed.`,
    );
  }
  if (await exists(ctx, dir)) {
    throw new CallerError(
      `The worktree directory '${dir}' already exists: pick another agent name, or remove it (\`git worktree remove\`) if its work is not needed.`,
    );
  }
  // The team's spare checkout of the base when there is one (no checkout to wait for), else a checkout now.
  const claimed = await claimSpare(ctx, { repo: plan.repo, base: plan.base, teamName, dir, branch });
  if (!claimed) await git.addWorktree(plan.repo, dir, branch, plan.base);
  const worktree: AgentWorktree = { path: dir, branch, base: plan.base };
  const undo = async () => {
    await git.removeWorktree(plan.repo, dir);
    await git.deleteBranch(plan.repo, branch, plan.base);
  };
  const cwd = path.join(dir, plan.cwdInRepo);
  if ((await ctx.edges.files.kind(cwd)) !== "directory") {
    await undo();
    throw new CallerError(
      `The working directory '${plan.cwdInRepo}' is not in the commit the worktree starts from (${plan.base.slice(0, 12)}): commit it first, or pass another cwd.`,
    );
  }
  return { worktree, cwd, undo };
}

/** Where launchAgent puts an agent: its worktree (made or entered again) and its cwd in it, or `cwd` as it is. */
export async function placeAgent(
  ctx: TeamsContext,
  request: WorktreeRequest | undefined,
  cwd: string,
  teamName: string,
  agentName: string,
): Promise<{ cwd: string; worktree?: AgentWorktree; undo?: () => Promise<void> }> {
  if (!request) return { cwd };
  if ("create" in request) return createWorktree(ctx, request.create, teamName, agentName);
  await reenterWorktree(ctx, request.reenter);
  return { cwd, worktree: request.reenter };
}

/**
 * A resumed agent's cwd: inside its worktree, and the worktree where spawn-agent puts them. A record edited by hand
 * could name any directory, which resume would then create a worktree in.
 */
export function worktreeCwd(ctx: TeamsContext, worktree: AgentWorktree, cwd: string): string {
  const root = worktreesRoot(ctx);
  const inside = (child: string, parent: string) => {
    const relative = path.relative(parent, child);
    return !relative.startsWith("..") && !path.isAbsolute(relative);
  };
  if (!inside(worktree.path, root) || worktree.path === root || !inside(cwd, worktree.path)) {
    throw new CallerError(
      `Working directory '${cwd}' is not inside the agent's worktree '${worktree.path}' under '${root}'.`,
    );
  }
  return cwd;
}

/**
 * A resumed agent goes back into its worktree: as it is, or recreated from its branch when the directory was removed
 * (from the base when the branch went too, as an unchanged branch is deleted with its worktree).
 */
export async function reenterWorktree(ctx: TeamsContext, worktree: AgentWorktree): Promise<void> {
  if (await exists(ctx, worktree.path)) return;
  const git = gitOf(ctx);
  const repo = await leaderRepo(ctx);
  await git.pruneWorktrees(repo);
  if (await git.branchTip(repo, worktree.branch)) {
    await git.checkoutWorktree(repo, worktree.path, worktree.branch);
  } else {
    await git.addWorktree(repo, worktree.path, worktree.branch, worktree.base);
  }
}

/** Whether the branch holds nothing that is not in its base or already in the leader's current HEAD. */
async function branchHasNoNewWork(git: GitApi, repo: string, tip: string, base: string): Promise<boolean> {
  if (await git.isAncestor(repo, tip, base)) return true;
  const head = await git.headCommit(repo);
  return head !== undefined && (await git.isAncestor(repo, tip, head));
}

/**
 * Remove the worktree and branch of an agent whose work is all home (nothing uncommitted, no ignored file that is
 * not rebuildable, no commit beyond its base or the leader's HEAD, or the branch still at `mergedTip`, just
 * squash-merged). Anything else is kept and said why.
 * Never throws: the caller is ending an agent or has just merged.
 */
export async function removeIfUnchanged(
  ctx: TeamsContext,
  worktree: AgentWorktree,
  mergedTip?: string,
): Promise<string[]> {
  try {
    const git = gitOf(ctx);
    const repo = await leaderRepo(ctx);
    const tip = await git.branchTip(repo, worktree.branch);
    const present = await exists(ctx, worktree.path);
    if (present) {
      const changed = await git.changedFiles(worktree.path);
      if (changed.length > 0) {
        return [
          `Worktree kept at ${worktree.path}: ${changed.length} uncommitted file(s) (${changed.slice(0, 5).join(", ")})`,
        ];
      }
      const work = await ignoredWork(ctx, worktree.path);
      if (work.length > 0) {
        return [
          `Worktree kept at ${worktree.path}: ${work.length} ignored file(s) that no build makes again (${namedPaths(work, 5)}), which removing it would delete. Copy what you need, then remove it by hand (\`git worktree remove --force ${worktree.path}\`)`,
        ];
      }
    }
    if (tip && tip !== mergedTip && !(await branchHasNoNewWork(git, repo, tip, worktree.base))) {
      return [
        `Worktree kept at ${worktree.path}: branch ${worktree.branch} has commits not merged (merge-agent brings them home)`,
      ];
    }
    if (present) await git.removeWorktree(repo, worktree.path);
    else await git.pruneWorktrees(repo);
    if (tip) await git.deleteBranch(repo, worktree.branch, tip);
    ctx.log("info", `worktree ${worktree.path} removed`, { branch: worktree.branch });
    return [];
  } catch (error) {
    return [`Worktree ${worktree.path} left in place: ${errorText(error)}`];
  }
}

/**
 * What finishAgent does with an ended agent's worktree: nothing when there is none, when keepWorktrees is set, or when
 * a resume has claimed the agent (its successor works on in it); else removeIfUnchanged.
 */
export async function settleWorktree(ctx: TeamsContext, agent: AgentState): Promise<string[]> {
  if (!agent.worktree || ctx.options.keepWorktrees || agent.resumedBy) return [];
  return removeIfUnchanged(ctx, agent.worktree);
}

/** What is wrong with the worktrees of running agents among `views`, one warning per problem, for their status. */
export async function liveWorktreeWarnings(
  ctx: TeamsContext,
  views: readonly { state: AgentState }[],
): Promise<string[]> {
  const live = views.filter(({ state }) => state.worktree && state.status !== "terminated");
  const found = await Promise.all(
    live.map(async ({ state }) =>
      (await worktreeWarnings(ctx, state)).map((text) => `Agent ${state.name} (${state.agentId}): ${text}`),
    ),
  );
  return found.flat();
}

/** What is wrong with an agent's worktree (its directory or branch gone); [] when all is well. */
async function worktreeWarnings(ctx: TeamsContext, agent: AgentState): Promise<string[]> {
  if (!agent.worktree || !ctx.edges.git) return [];
  const warnings: string[] = [];
  const { path: dir, branch } = agent.worktree;
  if (!(await exists(ctx, dir))) warnings.push(`worktree directory ${dir} is gone`);
  try {
    const repo = await leaderRepo(ctx);
    if (!(await ctx.edges.git.branchTip(repo, branch))) warnings.push(`worktree branch ${branch} is gone`);
  } catch (error) {
    warnings.push(`worktree branch ${branch} cannot be checked: ${errorText(error)}`);
  }
  return warnings;
}

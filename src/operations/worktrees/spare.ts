import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import type { GitApi, WorktreeEntry } from "../../edges/git-api.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import { exists, gitOf, leaderRepo, teamWorktreesDir, worktreesRoot } from "./repo.ts";

/**
 * The team's spare worktree (specs/worktrees.md, "The spare"): a detached checkout of the leader's HEAD made in the
 * background, so that spawn-agent with a worktree moves it into place instead of waiting for a checkout. Names start
 * with "." so that no agent's directory can take them: `.spare-<commit>` is ready to be claimed; `.making-<pid>-*` is
 * being made (never used; removed by a later maker once that pid is gone, if git will); `.retiring-<pid>-*` is on its
 * way out; `.set-aside-*` was found written into and is never used nor deleted.
 */
const SPARE = ".spare-";
const MAKING = ".making-";
const RETIRING = ".retiring-";
const SET_ASIDE = ".set-aside-";
/** Passes of one maker: another request arrived, or HEAD moved, while it made a spare. */
const MAX_PASSES = 3;

/** A spare that this repository cannot use (see makeSpare): no more are made for the team in this process. */
class UnusableSpare extends Error {}
/** `<repo>\0<team>` of the teams whose spares proved unusable here: their spawns check out, as without spares. */
const noSpares = new Set<string>();

/** The team's spare for `commit`. */
export function spareDir(ctx: TeamsContext, teamName: string, commit: string): string {
  return path.join(teamWorktreesDir(ctx, teamName), `${SPARE}${commit}`);
}

/** A name no other process and no other call of this one picks. */
function unique(ctx: TeamsContext): string {
  return `${ctx.edges.processes.self.pid}-${uuidv4().slice(0, 8)}`;
}

export interface SpareClaim {
  repo: string;
  /** The commit the agent's branch starts from: only a spare of this very commit will do. */
  base: string;
  teamName: string;
  /** The agent's worktree directory, checked absent (git would move the spare INTO an existing directory). */
  dir: string;
  /** The agent's new branch, checked absent. */
  branch: string;
}

/**
 * Take the team's spare of `base` as the agent's worktree at `dir`, on its new branch at `base`: true when the agent
 * got it, false when there was none fit to use (the caller checks one out as before; nothing of the spare is left at
 * `dir`). The claim is one rename (`git worktree move`): of two spawns racing for the spare exactly one gets it, the
 * other finds nothing to move. What was moved is checked before it is used: one that is not a clean detached checkout
 * of `base` (someone wrote into it) is set aside.
 */
export async function claimSpare(ctx: TeamsContext, claim: SpareClaim): Promise<boolean> {
  if (!ctx.options.spareWorktrees) return false;
  const git = gitOf(ctx);
  const { repo, base, dir, branch } = claim;
  const spare = spareDir(ctx, claim.teamName, base);
  // No spare, or one of another commit (HEAD moved since it was made): a checkout as before.
  if ((await ctx.edges.files.kind(spare, { follow: false })) !== "directory") return false;
  try {
    // Fails unless `spare` is a registered, unlocked worktree of this repository.
    await git.moveWorktree(repo, spare, dir);
  } catch (error) {
    ctx.log("debug", `spare worktree ${spare} not claimed: ${errorText(error)}`);
    return false;
  }
  // `dir` appeared between the caller's check and the move (a spawn of the same name at the same moment): git then
  // moved the spare inside it. Put it back; `dir` is that other agent's and is not touched.
  const inside = path.join(dir, path.basename(spare));
  if ((await ctx.edges.files.kind(inside, { follow: false })) === "directory") {
    await giveBack(ctx, claim, inside, spare);
    return false;
  }
  const unfit = await unfitReason(ctx, git, dir, base);
  if (unfit) {
    await setAside(ctx, repo, dir, unfit);
    return false;
  }
  try {
    await git.createBranch(repo, branch, base);
  } catch (error) {
    // The branch appeared since it was checked: the checkout path fails on it too, in git's words.
    ctx.log("debug", `spare worktree not used: ${errorText(error)}`);
    await giveBack(ctx, claim, dir, spare);
    return false;
  }
  try {
    await git.attachHead(dir, branch);
  } catch (error) {
    ctx.log("warn", `spare worktree not used: ${errorText(error)}`);
    await git.deleteBranch(repo, branch, base).catch(() => {});
    await giveBack(ctx, claim, dir, spare);
    return false;
  }
  ctx.log("info", `spare worktree ${spare} taken as ${dir}`, { branch });
  return true;
}

/**
 * Why the worktree just moved to `dir` is not what a checkout of `base` would be, or undefined when it is: its own
 * work tree (not a directory git moved it into), a detached HEAD at `base`, nothing changed or added.
 */
async function unfitReason(
  ctx: TeamsContext,
  git: GitApi,
  dir: string,
  base: string,
): Promise<string | undefined> {
  const [top, real, head, branch, changed] = await Promise.all([
    git.topLevel(dir),
    ctx.edges.files.realpath(dir).catch(() => dir),
    git.headCommit(dir),
    git.currentBranch(dir),
    git.changedFiles(dir).catch((error: unknown) => errorText(error)),
  ]);
  if (top !== real) return `it is not a work tree of its own (${top ?? "none"})`;
  if (head !== base) return `its HEAD is ${head ?? "no commit"}, not ${base}`;
  if (branch !== undefined) return `it is on branch ${branch}, not detached`;
  if (typeof changed === "string") return `its status cannot be read: ${changed}`;
  if (changed.length > 0) {
    return `it was written into: ${changed.length} changed file(s) (${changed.slice(0, 5).join(", ")})`;
  }
  return undefined;
}

/**
 * Move a worktree that must not be used (written into, or not removable) to `.set-aside-<time>-<unique>`: never
 * claimed, never deleted by us; a human decides. Logged, never thrown.
 */
async function setAside(ctx: TeamsContext, repo: string, dir: string, why: string): Promise<void> {
  const aside = path.join(path.dirname(dir), `${SET_ASIDE}${ctx.clock.now()}-${unique(ctx)}`);
  try {
    await gitOf(ctx).moveWorktree(repo, dir, aside);
    ctx.log("warn", `spare worktree set aside at ${aside}: ${why}`);
  } catch (error) {
    ctx.log(
      "warn",
      `spare worktree at ${dir} is unfit (${why}) and could not be set aside: ${errorText(error)}`,
    );
  }
}

/**
 * A claimed spare not used after all goes back to its name, under the team's spare lock (a maker holding it may be
 * creating that name: git would move one into the other). With the lock busy or the name taken, it is removed (it is
 * clean; one git will not remove is set aside).
 */
async function giveBack(ctx: TeamsContext, claim: SpareClaim, dir: string, spare: string): Promise<void> {
  const git = gitOf(ctx);
  const release = await ctx.store.trySpareLock(claim.teamName).catch(() => undefined);
  try {
    if (release && !(await exists(ctx, spare))) {
      await git.moveWorktree(claim.repo, dir, spare);
      return;
    }
  } catch (error) {
    ctx.log("warn", `spare worktree at ${dir} could not be put back: ${errorText(error)}`);
    return;
  } finally {
    await release?.();
  }
  await retire(ctx, claim.repo, dir, teamWorktreesDir(ctx, claim.teamName));
}

/** This process's makers, per context and team: tests and the bench wait for them (sparesSettled). */
interface Maker {
  /** A refill was asked for while this one ran: it looks once more before it ends. */
  again: boolean;
  done: Promise<void>;
}
const makers = new WeakMap<TeamsContext, Map<string, Maker>>();

/**
 * Make sure the team has a spare of the leader's current HEAD, in the background: started, never awaited, never
 * throws (problems are logged). Called after create-team with `worktrees: true`, after each spawn that made a
 * worktree and after merge-agent (HEAD moved). One maker per team in this process; across processes the team's `spare.lock` (taken without waiting)
 * keeps a second one from checking out the same spare for nothing.
 */
export function refillSpare(ctx: TeamsContext, teamName: string): void {
  if (!ctx.options.spareWorktrees || !ctx.edges.git) return;
  let running = makers.get(ctx);
  if (!running) {
    running = new Map();
    makers.set(ctx, running);
  }
  const current = running.get(teamName);
  if (current) {
    current.again = true;
    return;
  }
  const maker: Maker = { again: false, done: Promise.resolve() };
  const mine = running;
  maker.done = keepSpare(ctx, teamName, maker)
    .catch((error: unknown) => {
      ctx.log("warn", `the spare worktree of team ${teamName} was not made: ${errorText(error)}`);
    })
    .finally(() => {
      mine.delete(teamName);
    });
  running.set(teamName, maker);
}

/** Resolves once no maker of this context runs (a maker started meanwhile is waited for too). Never rejects. */
export async function sparesSettled(ctx: TeamsContext): Promise<void> {
  for (;;) {
    const running = [...(makers.get(ctx)?.values() ?? [])];
    if (running.length === 0) return;
    await Promise.all(running.map((maker) => maker.done));
  }
}

async function keepSpare(ctx: TeamsContext, teamName: string, maker: Maker): Promise<void> {
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    maker.again = false;
    const release = await ctx.store.trySpareLock(teamName);
    // Another process is making it.
    if (!release) return;
    let made: boolean;
    try {
      made = await makeSpare(ctx, teamName);
    } finally {
      await release();
    }
    // After a spare was made, one more look: HEAD may have moved while it was checked out.
    if (!made && !maker.again) return;
  }
}

/**
 * Under the team's spare lock: retire spares of other commits, then check out `.making-<unique>` at low priority and
 * rename it `.spare-<HEAD>` once complete, so that a crash never leaves a half-made spare under the ready name.
 * Whether a spare was made.
 */
async function makeSpare(ctx: TeamsContext, teamName: string): Promise<boolean> {
  const git = gitOf(ctx);
  const repo = await leaderRepo(ctx);
  if (noSpares.has(`${repo}\0${teamName}`)) return false;
  const head = await git.headCommit(repo);
  if (!head) return false;
  const teamDir = teamWorktreesDir(ctx, teamName);
  const spare = spareDir(ctx, teamName, head);
  const ours = await ourWorktrees(ctx, git.listWorktrees(repo));
  for (const entry of ours.filter((entry) => isLeftover(ctx, entry, path.basename(spare)))) {
    await retire(ctx, repo, entry.path);
  }
  if (ours.some((entry) => entry.team === teamName && entry.name === path.basename(spare))) return false;
  if (await exists(ctx, spare)) {
    ctx.log("warn", `${spare} is not a worktree of this repository: no spare worktree until it is removed`);
    return false;
  }
  const making = path.join(teamDir, `${MAKING}${unique(ctx)}`);
  await git.addDetachedWorktree(repo, making, head, { lowPriority: true });
  try {
    // A checkout that is not clean straight away (a post-checkout hook that writes files) would be set aside by
    // every claim and a new one made after it: one full checkout left behind per spawn.
    const unfit = await unfitReason(ctx, git, making, head);
    if (unfit) {
      throw new UnusableSpare(
        `a fresh checkout of ${head.slice(0, 12)} is not clean (${unfit}); this team's spawns check out without a spare`,
      );
    }
    // Only a holder of the team's spare lock creates `spare` (this maker, or a claim giving one back; claims only
    // take it away), so it is still absent; were it not, git would move the new one inside it.
    if (await exists(ctx, spare)) throw new Error(`${spare} appeared while the spare was made`);
    // Fails for a checkout with submodules (git moves none): then no claim could take it either.
    await git.moveWorktree(repo, making, spare).catch((error: unknown) => {
      throw new UnusableSpare(
        `git cannot move it (${errorText(error)}); this team's spawns check out without a spare`,
      );
    });
  } catch (error) {
    // Made seconds ago by this maker and used by nobody: removed whatever the hook or git put in it.
    await git.removeWorktree(repo, making, { force: true }).catch(() => {});
    if (error instanceof UnusableSpare) noSpares.add(`${repo}\0${teamName}`);
    throw error;
  }
  ctx.log("debug", `spare worktree ${spare} made`);
  return true;
}

interface OurWorktree {
  path: string;
  name: string;
  team: string;
  locked: boolean;
}

/** The registered worktrees of this repository in any team's directory whose name is one of the spare's. */
async function ourWorktrees(ctx: TeamsContext, listing: Promise<WorktreeEntry[]>): Promise<OurWorktree[]> {
  const root = worktreesRoot(ctx);
  // git records real paths; the root may be reached through a symlink (a temp dir on macOS).
  const real = await ctx.edges.files.realpath(root).catch(() => root);
  return (await listing)
    .filter(
      (entry) =>
        [SPARE, MAKING, RETIRING].some((prefix) => path.basename(entry.path).startsWith(prefix)) &&
        [root, real].includes(path.dirname(path.dirname(entry.path))),
    )
    .map((entry) => ({
      path: entry.path,
      name: path.basename(entry.path),
      team: path.basename(path.dirname(entry.path)),
      locked: entry.locked,
    }));
}

/**
 * What a maker removes: a spare of a commit that is not HEAD (`ready` is the spare of HEAD), this team's or another's
 * (a team long done keeps none for ever); a `.making-*` or `.retiring-*` whose process died (its pid is in the name)
 * and that git does not hold locked (an add killed mid-checkout stays locked: left for a human).
 */
function isLeftover(ctx: TeamsContext, entry: OurWorktree, ready: string): boolean {
  if (entry.name.startsWith(SPARE)) return entry.name !== ready;
  const pid = Number(entry.name.replace(/^\.[a-z]+-/, "").split("-")[0]);
  return !entry.locked && Number.isInteger(pid) && pid > 0 && !ctx.edges.processes.running(pid);
}

/**
 * A stale spare, a dead maker's leftover or a claimed spare given back: moved out of its name first, into `into`
 * (a claim racing with the removal of a spare would get a half-deleted tree), then removed; one that git will not
 * remove (written into) is set aside.
 */
async function retire(
  ctx: TeamsContext,
  repo: string,
  stale: string,
  into = path.dirname(stale),
): Promise<void> {
  const git = gitOf(ctx);
  const retiring = path.join(into, `${RETIRING}${unique(ctx)}`);
  try {
    await git.moveWorktree(repo, stale, retiring);
  } catch (error) {
    // Claimed meanwhile, or locked: not ours to remove now.
    ctx.log("debug", `worktree ${stale} left: ${errorText(error)}`);
    return;
  }
  try {
    await git.removeWorktree(repo, retiring);
  } catch (error) {
    await setAside(ctx, repo, retiring, `it could not be removed: ${errorText(error)}`);
  }
}

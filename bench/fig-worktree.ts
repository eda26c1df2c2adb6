import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { killAgent } from "../src/operations/agents/kill.ts";
import { spawnAgent } from "../src/operations/agents/spawn.ts";
import { createTeam } from "../src/operations/team/team.ts";
import { sparesSettled } from "../src/operations/worktrees/spare.ts";
import { makeTestContext, type TestContext } from "../tests/helpers/context.ts";
import { git } from "../tests/helpers/git.ts";
import { interleaved } from "./floors.ts";
import { note, timed } from "./setup.ts";
import { type Figure, figure, quantile, zipRounds } from "./stats.ts";

const FILES = 5_000;
const LEADER = "leader-wt";

/** A repository of FILES small files in 50 directories, one commit. */
async function bigRepo(dir: string): Promise<void> {
  for (let d = 0; d < 50; d++) {
    const sub = path.join(dir, `pkg${d}`);
    await mkdir(sub, { recursive: true });
    await Promise.all(
      Array.from({ length: FILES / 50 }, (_, f) =>
        writeFile(path.join(sub, `file${f}.ts`), `export const value${d}_${f} = ${d * 1000 + f};\n`),
      ),
    );
  }
  git(dir, "init", "--quiet", "--initial-branch=main");
  git(dir, "add", "--", ".");
  git(
    dir,
    "-c",
    "user.name=bench",
    "-c",
    "user.email=bench@example.invalid",
    "commit",
    "--quiet",
    "-m",
    "big",
  );
}

/** One spawn (fake server and tmux, real git), timed; the agent is killed after, untimed, which removes its worktree. */
async function spawnOnce(
  ctx: TestContext,
  worktree: boolean,
  between?: () => Promise<void>,
): Promise<number> {
  let agentId = "";
  const ms = await timed(async () => {
    const result = await spawnAgent(ctx, { teamName: "wt", prompt: "work", worktree }, LEADER);
    if (!result.success) throw new Error(result.error);
    agentId = result.agentId;
  });
  await between?.();
  const killed = await killAgent(ctx, { teamName: "wt", agentId, force: true }, LEADER);
  if (!killed.success) throw new Error(killed.error);
  return ms;
}

/** How many spawns took the team's spare so far (its log line). */
const claims = (ctx: TestContext) => ctx.logs.filter((line) => / taken as /.test(line.message)).length;

interface Rounds {
  plain: number[];
  /** The same pair's spawn without a worktree plus the claim's git steps by hand (handClaim). */
  claimFloor: number[];
  warm: number[];
  cold: number[];
  refill: number[];
  bare: number[];
}

/** A checkout made once, untimed, that the floor takes as a claim takes the spare, and puts back. */
interface ReadyCheckout {
  repo: string;
  ready: string;
  taken: string;
  base: string;
}

/**
 * The least git work of taking a ready checkout as an agent's worktree, timed: one `git worktree move`, the branch
 * created at the base, HEAD onto it. Then, untimed, all three undone, so the next round finds it ready again.
 */
async function handClaim(checkout: ReadyCheckout, round: number): Promise<number> {
  const { repo, ready, taken, base } = checkout;
  const branch = `floor-claim-${round}`;
  const ms = await timed(async () => {
    git(repo, "worktree", "move", "--", ready, taken);
    git(repo, "update-ref", `refs/heads/${branch}`, base, "");
    git(taken, "symbolic-ref", "HEAD", `refs/heads/${branch}`);
  });
  git(taken, "update-ref", "--no-deref", "HEAD", base);
  git(repo, "update-ref", "-d", `refs/heads/${branch}`);
  git(repo, "worktree", "move", "--", taken, ready);
  return ms;
}

/**
 * Spawns with and without a worktree per round. The spawn without one takes 5-17 ms on the fakes, so a pair's ratio to
 * it alone swung (quartiles 3.6x-7.2x over 21 pairs); twice as many pairs for a steadier median, at a refill (~2 s)
 * each.
 */
const WARM_PAIRS = 2;

/**
 * One round of the subject: WARM_PAIRS times a spawn without a worktree and the claim's git steps by hand (the floor
 * of the pair), then a spawn with a worktree taking a ready spare
 * (then the refill it starts, timed on its own while nothing else runs, as a leader has seconds between spawns); then
 * one with the spares off (the fallback: a checkout while the leader waits). Nothing of the background maker runs
 * during a timed spawn.
 */
async function subjectRound(
  ctx: TestContext,
  checkout: ReadyCheckout,
  rounds: Rounds,
  round: number,
): Promise<void> {
  for (let pair = 0; pair < WARM_PAIRS; pair++) {
    await sparesSettled(ctx);
    const p = await spawnOnce(ctx, false);
    const c = await handClaim(checkout, round * WARM_PAIRS + pair);
    const claimed = claims(ctx);
    let refill = 0;
    const w = await spawnOnce(ctx, true, async () => {
      refill = await timed(() => sparesSettled(ctx));
    });
    if (claims(ctx) !== claimed + 1) throw new Error("the spawn with a worktree did not take the spare");
    // The first round warms the page cache and the JIT.
    if (round === 0) continue;
    rounds.plain.push(p);
    rounds.claimFloor.push(p + c);
    rounds.warm.push(w);
    rounds.refill.push(refill);
  }
  const claimed = claims(ctx);
  ctx.options.spareWorktrees = false;
  const c = await spawnOnce(ctx, true);
  ctx.options.spareWorktrees = true;
  if (claims(ctx) !== claimed) throw new Error("the spawn without spares took one");
  if (round > 0) rounds.cold.push(c);
}

/**
 * 9. spawn-agent with a worktree on a repository of 5,000 files (fake server and tmux, real git). The checkout, which
 * every worktree costs whoever makes it (the floor: a bare `git worktree add` of the same repository), is made
 * beforehand in the background (the team's spare, specs/worktrees.md): 9a/9b time the spawn that takes it (9a beside
 * a spawn without a worktree plus the claim's own git steps by hand), target under 300 ms added to the spawn; 9c the
 * fallback without a spare against the floor (target 1.2x); 9d the refill.
 * Not in these figures: the real server's per-directory instance boot in the new worktree and the pane's
 * `opencode attach` (figure 6 times a real spawn, without a worktree).
 */
export async function benchWorktree(quick: boolean): Promise<Figure[]> {
  const ctx = await makeTestContext({ promptRetryDelayMs: 0 });
  // Beside the project, as the bare floor's checkouts are: a worktree inside it would be in the spawns' repository.
  const floorDirs = {
    repo: ctx.projectRoot,
    ready: `${ctx.projectRoot}-floor-ready`,
    taken: `${ctx.projectRoot}-floor-taken`,
  };
  try {
    await bigRepo(ctx.projectRoot);
    const created = await createTeam(ctx, { teamName: "wt", worktrees: true }, LEADER);
    if (!created.success) throw new Error(created.error);
    const rounds: Rounds = { plain: [], claimFloor: [], warm: [], cold: [], refill: [], bare: [] };
    const checkout: ReadyCheckout = { ...floorDirs, base: git(ctx.projectRoot, "rev-parse", "HEAD") };
    git(ctx.projectRoot, "worktree", "add", "--quiet", "--detach", "--", checkout.ready, checkout.base);
    const floor = async (round: number) => {
      await sparesSettled(ctx);
      const dir = path.join(ctx.projectRoot, "..", `${path.basename(ctx.projectRoot)}-bare-${round}`);
      const ms = await timed(async () =>
        git(ctx.projectRoot, "worktree", "add", "--quiet", "-b", `bare${round}`, "--", dir),
      );
      git(ctx.projectRoot, "worktree", "remove", "--", dir);
      if (round > 0) rounds.bare.push(ms);
    };
    // A round makes four checkouts of the repository (about 20 s on a quiet 2-core machine): the short run times one.
    await interleaved((quick ? 1 : 21) + 1, (round) => subjectRound(ctx, checkout, rounds, round), floor);
    const { plain, claimFloor, warm, cold, refill, bare } = rounds;
    // The two spawns of a pair run back to back: a slow spell of a few seconds meets both.
    const added = zipRounds(warm, plain).map(([withWorktree, without]) => withWorktree - without);
    const median = (samples: number[]) => quantile(samples, 0.5).toFixed(1);
    note(
      `worktree: spawn median ${median(plain)} ms without (and the claim's git steps by hand: ${median(claimFloor)} ms), ${median(warm)} ms with a spare, ${median(cold)} ms without a spare; git worktree add ${median(bare)} ms`,
    );
    return [
      figure(
        "9a",
        "spawn + worktree, spare ready",
        "ms",
        warm,
        {
          floor: {
            what: "spawn-agent without a worktree, then by hand git worktree move of a ready checkout, branch created, HEAD onto it",
            samples: claimFloor,
            also: { what: "spawn-agent without a worktree", samples: plain },
            pairs: zipRounds(warm, claimFloor),
          },
        },
        `${FILES} files, fakes`,
      ),
      figure(
        "9b",
        "worktree's share of 9a",
        "ms",
        added,
        { absolute: { text: "< 300 ms", ok: (m) => m < 300 } },
        "added to the spawn by the worktree, spare ready (9a - without, per pair)",
      ),
      figure(
        "9c",
        "spawn + worktree, no spare",
        "ms",
        cold,
        {
          floor: {
            what: "bare git worktree add of the same repository",
            samples: bare,
            maxRatio: 1.2,
            also: { what: "spawn-agent without a worktree", samples: plain },
          },
        },
        `a checkout; ${FILES} files, fakes`,
      ),
      figure(
        "9d",
        "refill: next spare ready",
        "ms",
        refill,
        { floor: { what: "bare git worktree add", samples: bare } },
        "the refill after a spawn, in the background at nice 19",
      ),
    ];
  } finally {
    await Promise.all(
      [floorDirs.ready, floorDirs.taken].map((dir) => rm(dir, { recursive: true, force: true })),
    );
    await ctx.cleanup();
  }
}

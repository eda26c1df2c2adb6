import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { killAgent } from "../src/operations/agents/kill.ts";
import { spawnAgent } from "../src/operations/agents/spawn.ts";
import { createTeam } from "../src/operations/team/team.ts";
import { makeTestContext, type TestContext } from "../tests/helpers/context.ts";
import { git } from "../tests/helpers/git.ts";
import { interleaved } from "./floors.ts";
import { note, timed } from "./setup.ts";
import { type Figure, figure, quantile } from "./stats.ts";

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

/** One spawn (fake server and tmux, real git) and its duration; the agent is killed after, which removes its worktree. */
async function spawnOnce(ctx: TestContext, worktree: boolean): Promise<number> {
  let agentId = "";
  const ms = await timed(async () => {
    const result = await spawnAgent(ctx, { teamName: "wt", prompt: "work", worktree }, LEADER);
    if (!result.success) throw new Error(result.error);
    agentId = result.agentId;
  });
  const killed = await killAgent(ctx, { teamName: "wt", agentId, force: true }, LEADER);
  if (!killed.success) throw new Error(killed.error);
  return ms;
}

/**
 * 9. spawn-agent with a worktree on a repository of 5,000 files (fake server and tmux, real git). Its floor is a bare
 * `git worktree add` of the same repository: the checkout every worktree costs, whoever makes it. Target 1.2x: the
 * plugin adds a few short git calls and the spawn itself (shown beside, without a worktree), a fraction of the checkout.
 */
export async function benchWorktree(quick: boolean): Promise<Figure[]> {
  const ctx = await makeTestContext({ promptRetryDelayMs: 0 });
  try {
    await bigRepo(ctx.projectRoot);
    const created = await createTeam(ctx, { teamName: "wt" }, LEADER);
    if (!created.success) throw new Error(created.error);
    const plain: number[] = [];
    const withTree: number[] = [];
    const bare: number[] = [];
    const subject = async (round: number) => {
      const p = await spawnOnce(ctx, false);
      const w = await spawnOnce(ctx, true);
      // The first round warms the page cache and the JIT.
      if (round > 0) {
        plain.push(p);
        withTree.push(w);
      }
    };
    const floor = async (round: number) => {
      const dir = path.join(ctx.projectRoot, "..", `${path.basename(ctx.projectRoot)}-bare-${round}`);
      const ms = await timed(async () =>
        git(ctx.projectRoot, "worktree", "add", "--quiet", "-b", `bare${round}`, "--", dir),
      );
      git(ctx.projectRoot, "worktree", "remove", "--", dir);
      if (round > 0) bare.push(ms);
    };
    await interleaved((quick ? 7 : 21) + 1, subject, floor);
    const added = quantile(withTree, 0.5) - quantile(plain, 0.5);
    note(
      `worktree: spawn median ${quantile(plain, 0.5).toFixed(1)} ms without, ${quantile(withTree, 0.5).toFixed(1)} ms with`,
    );
    return [
      figure("9a", `spawn-agent with a worktree, ${FILES} files, fakes`, "ms", withTree, {
        floor: {
          what: "bare git worktree add of the same repository",
          samples: bare,
          maxRatio: 1.2,
          also: { what: "spawn-agent without a worktree", samples: plain },
        },
      }),
      figure("9b", "added to the spawn by the worktree (median 9a - median without)", "ms", [added]),
    ];
  } finally {
    await ctx.cleanup();
  }
}

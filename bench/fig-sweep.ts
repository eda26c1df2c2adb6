import { StaleSweeper } from "../src/operations/sweep.ts";
import { makeTestContext, recordServerInfo, type TestContext } from "../tests/helpers/context.ts";
import { leaderSession, note, seedTeam, timed } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

const AGENTS = 1000;

/** A project with one team of `count` workers whose sessions the (fake) project server knows, idle. */
async function project(
  agentsAt: (ctx: TestContext) => Parameters<typeof seedTeam>[3],
  count = AGENTS,
): Promise<TestContext> {
  const ctx = await makeTestContext();
  const team = await seedTeam(ctx, "big", count, agentsAt(ctx), { tasks: true });
  for (const agent of team.agents) ctx.server.addSession({ id: agent.sessionId });
  // The leader runs in this process: the notice is delivered to its session on the local server.
  ctx.local.addSession({ id: leaderSession("big") });
  await recordServerInfo(ctx, 28_001);
  return ctx;
}

/** 3. One stale sweep over 1000 agents: all fresh (first sweep of a sweeper, and steady state), all going inactive. */
export async function benchSweep(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 3 : 10;
  const cold: number[] = [];
  const warm: number[] = [];
  const fresh = await project(() => () => ({}));
  try {
    for (let run = 0; run < runs; run++) {
      // A new sweeper has no memory of which agents are fresh: it reads every agent file and slot once.
      const sweeper = new StaleSweeper(fresh);
      cold.push(await timed(() => sweeper.sweep()));
      fresh.clock.advance(15_000);
      const report = await sweeper.sweep();
      warm.push(report.durationMs);
      if (report.checked !== AGENTS || report.inactive.length > 0) throw new Error("fresh sweep went wrong");
      fresh.clock.advance(-15_000);
    }
  } finally {
    await fresh.cleanup();
  }
  note(`sweep: fresh ${runs} runs`);

  const inactiveRuns = quick ? 2 : 5;
  const inactive100 = await goingInactive(100, inactiveRuns);
  const inactive1000 = await goingInactive(AGENTS, inactiveRuns);
  note(`sweep: inactive ${inactiveRuns} runs`);
  return [
    figure("3a", "sweep of 1000 fresh agents, new sweeper (reads every file)", "ms", cold, {
      text: "< 50 ms",
      ok: (m) => m < 50,
    }),
    figure("3b", "sweep of 1000 fresh agents, steady state", "ms", warm, {
      text: "< 50 ms",
      ok: (m) => m < 50,
    }),
    figure(
      "3c",
      "sweep: 100 agents go inactive at once (a durable write per agent file; tasks, notice, history batched)",
      "ms",
      inactive100,
      { text: "< 300 ms", ok: (m) => m < 300 },
    ),
    figure("3d", "sweep: 1000 agents go inactive at once (as 3c)", "ms", inactive1000, {
      text: "< 3000 ms",
      ok: (m) => m < 3000,
    }),
  ];
}

/** Sweeps in which `count` silent agents, one miss already counted, all go inactive: one timing per fresh project. */
async function goingInactive(count: number, runs: number): Promise<number[]> {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    // Silent for 80 s with one miss counted a sweep ago: this sweep counts the second and gives all of them up.
    const ctx = await project(
      (c) => () => {
        const now = c.clock.now();
        return {
          heartbeatTs: new Date(now - 80_000).toISOString(),
          consecutiveMisses: 1,
          lastMissAt: new Date(now - 15_000).toISOString(),
        };
      },
      count,
    );
    try {
      const sweeper = new StaleSweeper(ctx);
      let ended = 0;
      times.push(
        await timed(async () => {
          ended = (await sweeper.sweep()).inactive.length;
        }),
      );
      if (ended !== count) throw new Error(`expected ${count} inactive, got ${ended}`);
      const board = await ctx.store.readTasks("big");
      const pending =
        board.kind === "ok" ? board.value.tasks.filter((t) => t.status === "pending").length : 0;
      if (pending !== count) throw new Error(`expected ${count} tasks back to pending, got ${pending}`);
    } finally {
      await ctx.cleanup();
    }
  }
  return times;
}

import { makeTestContext } from "../tests/helpers/context.ts";
import { note, seedTeam, timed } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";
import { benchTools } from "./tool.ts";

/** 1. The heartbeat tool, called in-process the way OpenCode calls it, round-robin over a team of 10. */
export async function benchHeartbeat(quick: boolean): Promise<Figure[]> {
  const ctx = await makeTestContext();
  try {
    const call = benchTools(ctx);
    const team = await seedTeam(ctx, "hb", 10);
    const calls = quick ? 500 : 3000;
    const samples: number[] = [];
    for (let i = 0; i < calls + 200; i++) {
      const agent = team.agents[i % team.agents.length];
      if (!agent) throw new Error("no agent");
      ctx.clock.advance(1);
      let success = false;
      const ms = await timed(async () => {
        const result = await call(
          "heartbeat",
          { teamName: "hb", agentId: agent.agentId, metadata: { step: i } },
          agent.sessionId,
        );
        success = result.success;
      });
      if (!success) throw new Error("heartbeat failed");
      // The first calls warm up the JIT and the page cache.
      if (i >= 200) samples.push(ms);
    }
    note(`heartbeat: ${calls} calls`);
    return [
      figure("1", "heartbeat tool call, team of 10, in-process", "ms", samples, {
        text: "median < 1 ms",
        ok: (m) => m < 1,
      }),
    ];
  } finally {
    await ctx.cleanup();
  }
}

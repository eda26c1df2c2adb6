import { makeTestContext } from "../tests/helpers/context.ts";
import { interleaved, readAndParseAll } from "./floors.ts";
import { leaderSession, note, seedTeam, timed } from "./setup.ts";
import { type Figure, figure, zipRounds } from "./stats.ts";
import { benchTools } from "./tool.ts";

const SIZE = 100;
/** Blocks of pairs with a pause between, as figure 2 does (see fig-status.ts for why). */
const BLOCKS = 20;
const BLOCK_PAUSE_MS = 300;

function usageOf(index: number, now: string) {
  const totals = {
    input: 1000 + index,
    output: 500,
    reasoning: 20,
    cacheRead: 3000,
    cacheWrite: 100,
    total: 4620 + index,
    costUsd: 0.0123 * (index + 1),
    turns: 12,
  };
  return { totals, byModel: { "mock/mock-model": totals }, countedAt: now };
}

/**
 * 12. get-agent-status (12a) and list-agents (12b) of a team of 100 agents, every one with usage counted and a budget:
 * usage is read from the agent files, so neither asks any OpenCode server (checked: the fake servers record every
 * call, and the figure fails on one). Floor: figure 2's, read and parse every agent file and slot of the team. Target
 * 1.5x: on top of the reads, the tools check the caller, validate, sum the team's usage and serialise.
 */
export async function benchUsage(quick: boolean): Promise<Figure[]> {
  const ctx = await makeTestContext();
  try {
    const call = benchTools(ctx);
    const teamName = "spend";
    const seeded = await seedTeam(ctx, teamName, SIZE, () => ({ budget: { usd: 5, tokens: 1_000_000 } }));
    // Usage is counted into each agent's heartbeat slot, as the event monitor leaves it.
    const now = new Date(ctx.clock.now()).toISOString();
    seeded.agents.forEach((agent, index) => {
      ctx.store.writeHeartbeat(teamName, agent.agentId, {
        version: 1,
        heartbeatTs: agent.heartbeatTs,
        source: "tool",
        updates: 1,
        usage: usageOf(index, now),
      });
    });
    const dir = ctx.store.paths.agentsDir(teamName);
    const tools = [
      { id: "14a", tool: "get-agent-status", args: { teamName } },
      { id: "14b", tool: "list-agents", args: { teamName, grouped: false } },
    ] as const;
    const figures: Figure[] = [];
    for (const { id, tool, args } of tools) {
      const samples: number[] = [];
      const reads: number[] = [];
      const subject = async (keep: boolean) => {
        const ms = await timed(async () => {
          const result = (await call(tool, args, leaderSession(teamName))) as { success: boolean };
          if (!result.success) throw new Error(`${tool} failed`);
        });
        if (keep) samples.push(ms);
      };
      const floor = async (keep: boolean) => {
        const ms = await timed(() => readAndParseAll(dir));
        if (keep) reads.push(ms);
      };
      const blocks = quick ? 1 : BLOCKS;
      for (let block = 0; block < blocks; block++) {
        await interleaved(
          block === 0 ? 3 : 1,
          () => subject(false),
          () => floor(false),
        );
        await interleaved(
          quick ? 10 : 20,
          () => subject(true),
          () => floor(true),
        );
        if (!quick) await Bun.sleep(BLOCK_PAUSE_MS);
      }
      const calls = [...ctx.server.calls, ...ctx.local.calls];
      if (calls.length > 0) throw new Error(`${tool} asked a server: ${calls.slice(0, 3).join(", ")}`);
      figures.push(
        figure(id, `${tool}, team of ${SIZE} with usage`, "ms", samples, {
          floor: {
            what: `read and parse ${SIZE + 1} agent files and slots`,
            samples: reads,
            maxRatio: 1.5,
            pairs: zipRounds(samples, reads),
          },
        }),
      );
    }
    note(`usage listings: ${quick ? 1 : BLOCKS} blocks of ${quick ? 10 : 20} pairs each, no server call`);
    return figures;
  } finally {
    await ctx.cleanup();
  }
}

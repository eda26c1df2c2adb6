import { readdir } from "node:fs/promises";
import { makeTestContext } from "../tests/helpers/context.ts";
import { interleaved, readAndParseAll, statAll } from "./floors.ts";
import { leaderSession, note, seedTeam, timed } from "./setup.ts";
import { type Figure, figure, zipRounds } from "./stats.ts";
import { benchTools } from "./tool.ts";

const SIZES = [10, 100, 1000] as const;
/** Other teams of the project, present while every size is measured: reading one team must not read them. */
const OTHER_TEAMS = 2;
const OTHER_SIZE = 1000;
/**
 * The pairs run in blocks with a pause between. The tool's extra work is mostly CPU (checks, schemas, JSON) and the
 * floor's mostly system calls, so a slow spell of the CPU or of the disk moves their ratio: in blocks of 200 pairs
 * back to back, the team of 10 gave 1.36x-2.60x within one process. Spread over 10-15 s, the pairs meet many spells.
 * Within a block they run back to back, so both sides of a pair are as warm (a pause before every pair left the
 * first side of each pair cold and made its ratio swing by 3x with the order).
 */
const BLOCKS = 30;
const BLOCK_PAUSE_MS = 500;

/**
 * 2. get-agent-status (all agents of a team, as the leader) for 10, 100 and 1000 agents, with 2000 agents of other
 * teams beside them. One of the other teams holds a damaged agent file: a read of it would move it aside, so finding it
 * untouched afterwards shows no other team's agent files were read.
 * Floor: list the team's agents directory, then read and JSON-parse every agent file and the head of every slot, all
 * at once; what any reader must do to report every agent's state and liveness. Stat'ing every file (what a reader
 * with a cache must still do to learn nothing changed) is shown beside it. Target 1.5x at 1000 agents: on top of the
 * reads, the tool checks the caller is the leader and validates and serialises what it read.
 */
export async function benchStatus(quick: boolean): Promise<Figure[]> {
  const ctx = await makeTestContext();
  try {
    const call = benchTools(ctx);
    for (let t = 0; t < OTHER_TEAMS; t++) await seedTeam(ctx, `other-${t}`, OTHER_SIZE);
    const tripwireDir = ctx.store.paths.agentsDir("other-0");
    const tripwire = `${tripwireDir}/00000000-0000-4000-8000-000000000000.json`;
    await Bun.write(tripwire, "{ damaged");
    for (const size of SIZES) await seedTeam(ctx, `team-${size}`, size);
    const blocksFor = (size: number) => (quick ? 1 : size <= 100 ? BLOCKS : BLOCKS / 2);
    const pairsFor = (size: number) => (quick ? 10 : size <= 100 ? 20 : 5);
    const figures: Figure[] = [];
    const medians: number[] = [];
    for (const size of SIZES) {
      const teamName = `team-${size}`;
      const dir = ctx.store.paths.agentsDir(teamName);
      const samples: number[] = [];
      const reads: number[] = [];
      const stats: number[] = [];
      const status = async (keep: boolean) => {
        let count = -1;
        const ms = await timed(async () => {
          const result = (await call("get-agent-status", { teamName }, leaderSession(teamName))) as {
            success: boolean;
            agents?: unknown[];
          };
          count = result.agents?.length ?? -1;
        });
        // The leader is listed too.
        if (count !== size + 1)
          throw new Error(`get-agent-status returned ${count} agents, expected ${size + 1}`);
        if (keep) samples.push(ms);
      };
      const floor = async (keep: boolean) => {
        const readMs = await timed(() => readAndParseAll(dir));
        const statMs = await timed(() => statAll(dir));
        if (keep) {
          reads.push(readMs);
          stats.push(statMs);
        }
      };
      for (let block = 0; block < blocksFor(size); block++) {
        // The first pairs warm up the JIT and the caches, at the start and again after each pause.
        await interleaved(
          block === 0 ? 3 : 1,
          () => status(false),
          () => floor(false),
        );
        await interleaved(
          pairsFor(size),
          () => status(true),
          () => floor(true),
        );
        if (!quick) await Bun.sleep(BLOCK_PAUSE_MS);
      }
      const f = figure(`2.${SIZES.indexOf(size) + 1}`, `get-agent-status, team of ${size}`, "ms", samples, {
        floor: {
          what: `read and parse ${size + 1} agent files and slots`,
          samples: reads,
          ...(size === 1000 ? { maxRatio: 1.5 } : {}),
          also: { what: "stat each", samples: stats },
          pairs: zipRounds(samples, reads),
        },
      });
      medians.push(f.median);
      figures.push(f);
    }
    const untouched = (await readdir(tripwireDir)).includes(tripwire.slice(tripwireDir.length + 1));
    if (!untouched) throw new Error("get-agent-status read another team's agent files");
    const last = figures[figures.length - 1];
    if (last) {
      const perAgent = ((medians[2] ?? 0) - (medians[1] ?? 0)) / 900;
      last.notes = `${(perAgent * 1000).toFixed(0)} µs per extra agent; other teams' files untouched`;
    }
    note(
      `get-agent-status: ${SIZES.map((size) => `${blocksFor(size)} x ${pairsFor(size)} runs of ${size}`).join(", ")}`,
    );
    return figures;
  } finally {
    await ctx.cleanup();
  }
}

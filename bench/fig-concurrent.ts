import path from "node:path";
import { makeTestContext } from "../tests/helpers/context.ts";
import type { ReaderResult, WorkerArgs, WriterResult } from "./concurrent-worker.ts";
import { note, seedTeam } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

const WRITERS = 4;
const AGENTS = 10;
const WORKER = path.join(import.meta.dir, "concurrent-worker.ts");

async function runWorker<T>(args: WorkerArgs): Promise<T> {
  const child = Bun.spawn([process.execPath, WORKER, JSON.stringify(args)], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (code !== 0) throw new Error(`bench worker (${args.role}) exited with ${code}: ${err.slice(-2000)}`);
  return JSON.parse(out) as T;
}

/**
 * 4. Four processes heartbeat one team of 10 for `seconds` while a fifth reads every file in a loop. Lost updates:
 * the heartbeats the writers were told succeeded, minus what the slots' `updates` counters grew by.
 */
export async function benchConcurrent(quick: boolean): Promise<Figure[]> {
  const seconds = quick ? 3 : 10;
  const rounds = quick ? 1 : 3;
  const rates: number[] = [];
  const lost: number[] = [];
  const unreadable: number[] = [];
  const readsPerSecond: number[] = [];
  let retries = 0;
  let failed = 0;
  for (let round = 0; round < rounds; round++) {
    const ctx = await makeTestContext();
    try {
      const team = await seedTeam(ctx, "conc", AGENTS);
      const before = new Map<string, number>();
      for (const agent of team.agents) {
        const slot = await ctx.store.readHeartbeat("conc", agent.agentId);
        before.set(agent.agentId, slot.record?.updates ?? 0);
      }
      // Bun takes a while to start; the clock starts once all of them can be running.
      const startAt = Date.now() + 1_500;
      const deadline = startAt + seconds * 1000;
      const base = {
        startAt,
        root: ctx.store.paths.root,
        teamName: "conc",
        agents: team.agents.map((a) => `${a.agentId}:${a.sessionId}`),
        deadline,
      };
      const [readerOut, ...writers] = await Promise.all([
        runWorker<ReaderResult>({ ...base, role: "reader", seed: 0 }),
        ...Array.from({ length: WRITERS }, (_, w) =>
          runWorker<WriterResult>({ ...base, role: "writer", seed: w * 3 }),
        ),
      ]);
      let succeeded = 0;
      let grew = 0;
      for (const agent of team.agents) {
        const slot = await ctx.store.readHeartbeat("conc", agent.agentId);
        grew += (slot.record?.updates ?? 0) - (before.get(agent.agentId) ?? 0);
        for (const w of writers) succeeded += w.ok[agent.agentId] ?? 0;
      }
      failed += writers.reduce((sum, w) => sum + w.failed, 0);
      rates.push(succeeded / seconds);
      lost.push(succeeded - grew);
      unreadable.push(readerOut.unreadable);
      readsPerSecond.push(readerOut.fileReads / seconds);
      retries += readerOut.slotRetries;
    } finally {
      await ctx.cleanup();
    }
  }
  note(`concurrent heartbeats: ${rounds} rounds of ${seconds} s`);
  return [
    figure(
      "4a",
      `heartbeats/s, ${WRITERS} processes, team of ${AGENTS}, ${seconds} s`,
      "1/s",
      rates,
      {
        text: "> 2000",
        ok: (m) => m > 2000,
      },
      failed > 0 ? `${failed} calls failed` : undefined,
    ),
    figure("4b", "lost updates", "count", lost, { text: "0", ok: (m) => m === 0 }),
    figure(
      "4c",
      "unreadable files seen by a 5th process reading in a loop",
      "count",
      unreadable,
      { text: "0", ok: (m) => m === 0 },
      `${readsPerSecond.map((r) => r.toFixed(0)).join("/")} file reads/s; ${retries} slot reads caught mid-write and re-read`,
    ),
  ];
}

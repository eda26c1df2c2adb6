import { afterEach, beforeEach, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { TaskGraph } from "../../src/operations/team/task-graph.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// The board's rules hold across processes: every choice is made under the board's lock, on the board as it is then.

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
const LEADER = "ses_lead";

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, LEADER);
});
afterEach(() => ctx.cleanup());

type RacerOut = { claimed: string[]; pointed: string[]; refused: string[] };

/** Start one racer per session on the shared storage, let them go at once, and return what each printed. */
async function race(sessions: { sessionId: string; mode: string; pairs?: string[] }[]): Promise<RacerOut[]> {
  const goFile = path.join(ctx.projectRoot, "go");
  const script = path.join(import.meta.dir, "fixtures", "task-racer.ts");
  const racers = sessions.map(({ sessionId, mode, pairs = [] }) =>
    Bun.spawn([process.execPath, script, ctx.projectRoot, "alpha", sessionId, mode, goFile, ...pairs], {
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  // The signal goes once every racer has loaded and polls for it, however slow the machine is to start them.
  const ready = sessions.map(({ sessionId }) => `${goFile}.ready-${sessionId}`);
  for (let waited = 0; !ready.every((file) => existsSync(file)); waited += 10) {
    if (waited > 60_000) throw new Error("the racers did not start within 60 s");
    await Bun.sleep(10);
  }
  await writeFile(goFile, "go");
  return Promise.all(
    racers.map(async (racer) => {
      const [out, err] = await Promise.all([
        new Response(racer.stdout).text(),
        new Response(racer.stderr).text(),
      ]);
      if ((await racer.exited) !== 0) throw new Error(`racer failed: ${err}`);
      return JSON.parse(out.trim().split("\n").pop() ?? "") as RacerOut;
    }),
  );
}

async function tasks() {
  const read = await ctx.store.readTasks("alpha");
  if (read.kind !== "ok") throw new Error("no board");
  return read.value.tasks;
}

test("two processes claiming at once never get the same task, and together take every ready one", async () => {
  await addAgent(ctx, "alpha", { sessionId: "ses_a", name: "worker-a" });
  await addAgent(ctx, "alpha", { sessionId: "ses_b", name: "worker-b" });
  const plan = Array.from({ length: 40 }, (_, i) => ({ title: `part ${i + 1}` }));
  // Five plans: 200 ready tasks, plus one blocked behind the first that no one may take. A claim appends one journal
  // line (a fraction of a millisecond), so it takes this many for the racers' claims to overlap on a busy machine.
  for (let plans = 0; plans < 5; plans++)
    await call("create-task", { teamName: "alpha", tasks: plan }, LEADER);
  await call("create-task", { teamName: "alpha", title: "after", blockedBy: ["task-1"] }, LEADER);
  const [a, b] = (await race([
    { sessionId: "ses_a", mode: "claim" },
    { sessionId: "ses_b", mode: "claim" },
  ])) as [RacerOut, RacerOut];
  const all = [...a.claimed, ...b.claimed];
  expect(new Set(all).size).toBe(all.length);
  expect(all.sort()).toEqual(Array.from({ length: 200 }, (_, i) => `task-${i + 1}`).sort());
  // Both really raced: each got some of them.
  expect(a.claimed.length).toBeGreaterThan(0);
  expect(b.claimed.length).toBeGreaterThan(0);
  const board = await tasks();
  expect(board.filter((task) => task.status === "in_progress")).toHaveLength(200);
  expect(board.find((task) => task.id === "task-201")?.status).toBe("pending");
}, 60_000);

test("two processes whose blockedBy updates together would close a cycle: exactly one of each pair is refused", async () => {
  const PAIRS = 30;
  const plan = Array.from({ length: PAIRS }, (_, i) => ({ title: `t${i + 1}` }));
  // Two plans: one call plans at most 50 tasks.
  expect((await call("create-task", { teamName: "alpha", tasks: plan }, LEADER)).success).toBe(true);
  expect((await call("create-task", { teamName: "alpha", tasks: plan }, LEADER)).success).toBe(true);
  await addAgent(ctx, "alpha", { sessionId: "ses_b", name: "worker-b" });
  const forward = Array.from({ length: PAIRS }, (_, i) => `task-${2 * i + 1}:task-${2 * i + 2}`);
  const backward = Array.from({ length: PAIRS }, (_, i) => `task-${2 * i + 2}:task-${2 * i + 1}`);
  const [a, b] = (await race([
    { sessionId: LEADER, mode: "point", pairs: forward },
    { sessionId: "ses_b", mode: "point", pairs: backward },
  ])) as [RacerOut, RacerOut];
  expect(a.pointed.length + b.pointed.length).toBe(PAIRS);
  expect(a.refused.length + b.refused.length).toBe(PAIRS);
  for (const refusal of [...a.refused, ...b.refused]) expect(refusal).toContain("would make a cycle");
  const board = await tasks();
  const graph = new TaskGraph(board);
  expect(graph.findCycle(board.map((task) => task.id))).toBeUndefined();
  for (let i = 0; i < PAIRS; i++) {
    const edges = [board[2 * i], board[2 * i + 1]].map((task) => task?.blockedBy.length ?? 0);
    expect(edges.reduce((x, y) => x + y, 0)).toBe(1);
  }
}, 60_000);

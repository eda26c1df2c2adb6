import { afterEach, beforeEach, expect, test } from "bun:test";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { TeamStore } from "../../src/state/team-store.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { teamWithTasks } from "../helpers/team.ts";

// kill -9 of a process in the middle of the board's status changes (journal appends, and the compactions that rewrite
// the board every 256 of them): the board always reads, no acknowledged change is lost, nothing is taken for damage.

let ctx: TestContext;

beforeEach(async () => {
  ctx = await makeTestContext();
  await teamWithTasks(ctx, ["one", "two", "three"]);
});
afterEach(() => ctx.cleanup());

/** The change number each task's updatedAt says (see the fixture); -1 for a task no change reached. */
async function changesOnBoard(): Promise<number[]> {
  const read = await new TeamStore(ctx.store.paths, ctx.store.lockTiming).readTasks("alpha");
  if (read.kind !== "ok") throw new Error(`board is ${read.kind}`);
  const base = Date.UTC(2026, 0, 1);
  return read.value.tasks.map((task) => {
    const n = (Date.parse(task.updatedAt) - base) / 1000;
    return n >= 0 && n < 1e9 ? n : -1;
  });
}

test("a writer killed with SIGKILL at any point leaves a board that reads, with every acknowledged change", async () => {
  const script = path.join(import.meta.dir, "fixtures", "task-journal-writer.ts");
  let from = 0;
  for (let round = 0; round < 6; round++) {
    const child = Bun.spawn([process.execPath, script, ctx.projectRoot, "alpha", String(from)], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const reader = child.stdout.getReader();
    let out = "";
    while (!out.includes("ready\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`writer ended: ${await new Response(child.stderr).text()}`);
      out += new TextDecoder().decode(value);
    }
    // Long enough for hundreds of changes (compactions among them), cut at a different moment each round.
    await Bun.sleep(150 + round * 37);
    child.kill("SIGKILL");
    await child.exited;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    const acknowledged = out
      .split("\n")
      .filter((line) => /^\d+$/.test(line))
      .map(Number);
    expect(acknowledged.length).toBeGreaterThan(0);
    const last = Math.max(...acknowledged);
    const onBoard = await changesOnBoard();
    // Each task holds its last acknowledged change, or the one in flight when the kill came (one later).
    for (let task = 0; task < 3; task++) {
      const lastForTask = last - ((((last - task) % 3) + 3) % 3);
      expect([lastForTask, lastForTask + 3]).toContain(onBoard[task] as number);
    }
    from = Math.max(...onBoard) + 1;
  }
  const names = await readdir(path.dirname(ctx.store.paths.tasks("alpha")));
  expect(names.filter((name) => name.includes(".corrupt-"))).toEqual([]);
  // And the board still takes changes.
  await ctx.store.updateTasks("alpha", (board) => ({ ...board, nextId: board.nextId + 1 }));
  expect((await changesOnBoard()).length).toBe(3);
}, 60_000);

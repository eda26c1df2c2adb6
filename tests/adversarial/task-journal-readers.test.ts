import { afterEach, beforeEach, expect, test } from "bun:test";
import path from "node:path";
import { TeamStore } from "../../src/state/team-store.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { teamWithTasks } from "../helpers/team.ts";

// Readers without the lock while another process changes statuses and compacts the journal into the board every 256
// changes: every board read is one whole state (never an old board with a newer journal or the reverse), and a reader
// never goes back in time.

let ctx: TestContext;

beforeEach(async () => {
  ctx = await makeTestContext();
  await teamWithTasks(ctx, ["one", "two", "three"]);
});
afterEach(() => ctx.cleanup());

/** The change number each task's updatedAt says (see the fixture). */
async function changes(store: TeamStore): Promise<{ tasks: number[]; counter: number }> {
  const read = await store.readTasks("alpha");
  if (read.kind !== "ok") throw new Error(`board is ${read.kind}`);
  return {
    tasks: read.value.tasks.map((task) => (Date.parse(task.updatedAt) - Date.UTC(2026, 0, 1)) / 1000),
    counter: read.value.nextId - 1000,
  };
}

test("readers meeting appends and compactions see whole states, in order", async () => {
  const script = path.join(import.meta.dir, "fixtures", "task-journal-writer.ts");
  // Every task once, so each state is three consecutive change numbers.
  const seed = new TeamStore(ctx.store.paths, ctx.store.lockTiming);
  for (let n = 0; n < 3; n++) {
    await seed.updateTasks("alpha", (board) => ({
      ...board,
      tasks: board.tasks.map((task, index) =>
        index === n ? { ...task, updatedAt: new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString() } : task,
      ),
    }));
  }
  const child = Bun.spawn([process.execPath, script, ctx.projectRoot, "alpha", "3"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const kept = new TeamStore(ctx.store.paths, ctx.store.lockTiming);
  const started = Date.now();
  let reads = 0;
  let last = -1;
  let lastFresh = -1;
  let mixesPossible = 0;
  try {
    while (Date.now() - started < 1_500) {
      // One store that keeps its board (reads only what was appended) and one that reads whole every time.
      for (const [store, isFresh] of [
        [kept, false],
        [new TeamStore(ctx.store.paths, ctx.store.lockTiming), true],
      ] as const) {
        const { tasks: seen, counter } = await changes(store);
        const top = Math.max(...seen);
        expect(seen.map((n) => n % 3)).toEqual([0, 1, 2]);
        expect(top - Math.min(...seen)).toBe(2);
        // The board's own field and the tasks' records are of one moment.
        expect(counter).toBeLessThanOrEqual(top);
        mixesPossible += counter > 0 ? 1 : 0;
        if (isFresh) {
          expect(top).toBeGreaterThanOrEqual(lastFresh);
          lastFresh = top;
        } else {
          expect(top).toBeGreaterThanOrEqual(last);
          last = top;
        }
        reads += 1;
      }
    }
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
  // The writer got well past a compaction (256 changes) while the readers read.
  expect(last).toBeGreaterThan(600);
  expect(reads).toBeGreaterThan(100);
  expect(mixesPossible).toBeGreaterThan(50);
}, 30_000);

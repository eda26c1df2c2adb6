import { afterEach, beforeEach, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// Hostile or clumsy dependency input is refused with an error that says what to do, and nothing is written.

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
const LEADER = "ses_lead";
type Res = { success: boolean; error?: string; task?: { id: string }; tasks?: { id: string }[] };

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, LEADER);
  await call("create-team", { teamName: "beta" }, "ses_lead_b");
});
afterEach(() => ctx.cleanup());

const boardText = () => readFile(ctx.store.paths.tasks("alpha"), "utf8");

async function plan(count: number, chained: boolean): Promise<void> {
  for (let start = 0; start < count; start += 50) {
    const tasks = Array.from({ length: Math.min(50, count - start) }, (_, i) => {
      const n = start + i + 1;
      return {
        ref: `r${n}`,
        title: `step ${n}`,
        ...(chained && n > 1 ? { blockedBy: [n - 1 === start ? `task-${start}` : `r${n - 1}`] } : {}),
      };
    });
    const result = await call<Res>("create-task", { teamName: "alpha", tasks }, LEADER);
    if (!result.success) throw new Error(result.error);
  }
}

test("an id of another team's board, or one that never existed, is refused naming it", async () => {
  await call("create-task", { teamName: "beta", title: "theirs" }, "ses_lead_b");
  await call("create-task", { teamName: "beta", title: "theirs too" }, "ses_lead_b");
  await call("create-task", { teamName: "beta", title: "theirs three" }, "ses_lead_b");
  await call("create-task", { teamName: "alpha", title: "ours" }, LEADER);
  const before = await boardText();
  for (const id of ["task-3", "task-999", "task-k7f2m-1", "../../etc/passwd"]) {
    const result = await call<Res>(
      "create-task",
      { teamName: "alpha", title: "x", blockedBy: ["task-1", id] },
      LEADER,
    );
    expect(result.success).toBe(false);
    expect(result.error).toContain(`'${id}', not on the board of team 'alpha'`);
    const update = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", blockedBy: [id] },
      LEADER,
    );
    expect(update.error).toContain("not on the board of team 'alpha'");
  }
  expect(await boardText()).toBe(before);
});

test("10,000 dependencies are refused with the bound, before the board is touched", async () => {
  await plan(3, false);
  const before = await boardText();
  const many = Array.from({ length: 10_000 }, (_, i) => `task-${i + 1}`);
  const created = await call<Res>("create-task", { teamName: "alpha", title: "x", blockedBy: many }, LEADER);
  expect(created.error).toContain("blockedBy lists 10000 tasks; a task may wait for at most 50");
  const updated = await call<Res>(
    "update-task",
    { teamName: "alpha", taskId: "task-1", blockedBy: many },
    LEADER,
  );
  expect(updated.error).toContain("at most 50");
  const planned = await call<Res>(
    "create-task",
    { teamName: "alpha", tasks: Array.from({ length: 10_000 }, (_, i) => ({ title: `t${i}` })) },
    LEADER,
  );
  expect(planned.error).toContain("one call plans 1 to 50");
  expect(await boardText()).toBe(before);
});

test("a graph 1,000 deep: closing it into a cycle is refused naming the path, shortened", async () => {
  await plan(1_000, true);
  const before = await boardText();
  const result = await call<Res>(
    "update-task",
    { teamName: "alpha", taskId: "task-1", blockedBy: ["task-1000"] },
    LEADER,
  );
  expect(result.success).toBe(false);
  expect(result.error).toContain("would make a cycle");
  expect(result.error).toContain("task-1 waits for task-1000 waits for task-999");
  expect(result.error).toContain("more …");
  expect(result.error).toContain("task-2 waits for task-1.");
  expect(await boardText()).toBe(before);
  // The deep chain itself is fine: the last task waits, the first is ready.
  const ready = await call<{ tasks: { id: string }[] }>(
    "list-tasks",
    { teamName: "alpha", ready: true },
    LEADER,
  );
  expect(ready.tasks.map((task) => task.id)).toEqual(["task-1"]);
}, 30_000);

test("a task blocking itself, and a cycle inside one plan, are refused and the plan writes nothing", async () => {
  await plan(1, false);
  const before = await boardText();
  const self = await call<Res>(
    "update-task",
    { teamName: "alpha", taskId: "task-1", blockedBy: ["task-1"] },
    LEADER,
  );
  expect(self.error).toContain("cycle, so none of these tasks could ever start: task-1 waits for task-1");
  const cyclic = await call<Res>(
    "create-task",
    {
      teamName: "alpha",
      tasks: [
        { ref: "a", title: "a", blockedBy: ["c"] },
        { ref: "b", title: "b", blockedBy: ["a"] },
        { ref: "c", title: "c", blockedBy: ["b", "task-1"] },
      ],
    },
    LEADER,
  );
  expect(cyclic.error).toContain("task-2 waits for task-4 waits for task-3 waits for task-2");
  expect(await boardText()).toBe(before);
});

test("plans with confusing refs or both forms are refused", async () => {
  const before = await boardText();
  const cases: [Record<string, unknown>, string][] = [
    [{ tasks: [{ ref: "task-1", title: "x" }] }, "looks like a task id"],
    [
      {
        tasks: [
          { ref: "a", title: "x" },
          { ref: "a", title: "y" },
        ],
      },
      "used twice",
    ],
    [{ title: "x", tasks: [{ title: "y" }] }, "not both"],
    [{}, "Give a title"],
    [{ tasks: [] }, "one call plans 1 to 50"],
  ];
  for (const [args, error] of cases) {
    const result = await call<Res>("create-task", { teamName: "alpha", ...args }, LEADER);
    expect(result.error).toContain(error);
  }
  expect(await boardText()).toBe(before);
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { utimes } from "node:fs/promises";
import { listTasks } from "../../src/operations/team/task.ts";
import type { Task } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leadTeam } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;
let leaderId = "";
const LEADER = "ses_lead";

type View = { id: string; status: string; description?: string; blocks: string[]; ready: boolean };
type Listed = {
  success: boolean;
  error?: string;
  tasks: View[];
  total: number;
  nextOffset?: number;
  title: string;
};

beforeEach(async () => {
  ctx = await makeTestContext();
  ({ call, leaderId } = await leadTeam(ctx, "alpha", LEADER));
});
afterEach(() => ctx.cleanup());

/** A board of `count` tasks written in one update: a chain, the first `completed` of them completed. */
async function board(count: number, completed = 0, description = (n: number) => `step ${n}`): Promise<void> {
  const at = new Date(ctx.clock.now()).toISOString();
  const tasks = Array.from(
    { length: count },
    (_, index): Task => ({
      id: `task-${index + 1}`,
      title: `Step ${index + 1}`,
      description: description(index + 1),
      status: index < completed ? "completed" : "pending",
      assignee: null,
      createdBy: leaderId,
      createdAt: at,
      updatedAt: at,
      blockedBy: index === 0 ? [] : [`task-${index}`],
    }),
  );
  await ctx.store.updateTasks("alpha", (current) => ({ ...current, nextId: count + 1, tasks }));
}

const list = (args: Record<string, unknown> = {}) =>
  call<Listed>("list-tasks", { teamName: "alpha", ...args }, LEADER);
const ids = (listed: Listed) => listed.tasks.map((task) => task.id);

describe("list-tasks answers in bounded pages", () => {
  test("a board within the default limit is listed whole, with its total and no nextOffset", async () => {
    await board(3);
    const listed = await list();
    expect(ids(listed)).toEqual(["task-1", "task-2", "task-3"]);
    expect(listed.total).toBe(3);
    expect(listed).not.toHaveProperty("nextOffset");
  });

  test("a bigger board: 100 tasks by default, total and nextOffset say what is left; offset and limit page on", async () => {
    await board(130);
    const first = await list();
    expect(first.tasks).toHaveLength(100);
    expect(first.tasks[0]?.id).toBe("task-1");
    expect(first.total).toBe(130);
    expect(first.nextOffset).toBe(100);
    expect(first.title).toBe("100 of 130 task(s)");
    const rest = await list({ offset: 100 });
    expect(ids(rest)).toEqual(Array.from({ length: 30 }, (_, i) => `task-${101 + i}`));
    expect(rest.total).toBe(130);
    expect(rest).not.toHaveProperty("nextOffset");
    const page = await list({ offset: 10, limit: 5 });
    expect(ids(page)).toEqual(["task-11", "task-12", "task-13", "task-14", "task-15"]);
    expect(page.nextOffset).toBe(15);
    expect((await list({ limit: 1000 })).tasks).toHaveLength(130);
    expect((await list({ offset: 500 })).tasks).toEqual([]);
  });

  test("filters apply before the page: total counts the matching tasks", async () => {
    await board(130, 120);
    const pending = await list({ status: "pending", limit: 4 });
    expect(ids(pending)).toEqual(["task-121", "task-122", "task-123", "task-124"]);
    expect(pending.total).toBe(10);
    expect(pending.nextOffset).toBe(4);
    const ready = await list({ ready: true });
    expect(ids(ready)).toEqual(["task-121"]);
    expect(ready.total).toBe(1);
  });

  test("limit and offset out of range are refused", async () => {
    await board(3);
    for (const args of [{ limit: 0 }, { limit: 1001 }, { limit: 2.5 }, { offset: -1 }]) {
      await expect(list(args)).rejects.toThrow();
      const direct = await listTasks(ctx, { teamName: "alpha", ...args }, LEADER).catch((error) => error);
      expect(String(direct)).toMatch(/limit|offset/);
    }
  });
});

describe("list-tasks descriptions", () => {
  test("a listing cuts a long description and says how to see it whole; taskId shows that task whole", async () => {
    const long = "x".repeat(2_000);
    await board(3, 0, (n) => (n === 2 ? long : `step ${n}`));
    const listed = await list();
    expect(listed.tasks[0]?.description).toBe("step 1");
    const cut = listed.tasks[1]?.description ?? "";
    expect(cut.startsWith("x".repeat(300))).toBe(true);
    expect(cut).toContain("1700 more characters cut");
    expect(cut).toContain("taskId");
    const one = await list({ taskId: "task-2" });
    expect(one.tasks).toEqual([
      expect.objectContaining({ id: "task-2", description: long, blocks: ["task-3"] }),
    ]);
    expect(one.total).toBe(1);
    expect((await list({ taskId: "task-9" })).tasks).toEqual([]);
    expect((await list({ taskId: "task-2", status: "completed" })).tasks).toEqual([]);
  });
});

describe("list-tasks of an unchanged board", () => {
  test("is answered from the views built for that board, and a change is seen at once", async () => {
    await board(5, 1);
    // Old enough for the stat cache to trust the file (it re-reads files changed within the last 100 ms).
    const past = new Date(Date.now() - 60_000);
    await utimes(ctx.store.paths.tasks("alpha"), past, past);
    const first = await listTasks(ctx, { teamName: "alpha" }, LEADER);
    const again = await listTasks(ctx, { teamName: "alpha" }, LEADER);
    if (!first.success || !again.success) throw new Error("listing failed");
    expect(again.tasks[0]).toBe(first.tasks[0] as (typeof again.tasks)[number]);
    expect(first.tasks.map((task) => task.ready)).toEqual([false, true, false, false, false]);
    const done = await call(
      "update-task",
      { teamName: "alpha", taskId: "task-2", status: "completed" },
      LEADER,
    );
    expect(done.success).toBe(true);
    const after = await listTasks(ctx, { teamName: "alpha" }, LEADER);
    if (!after.success) throw new Error("listing failed");
    expect(after.tasks.map((task) => [task.status, task.ready])).toEqual([
      ["completed", false],
      ["completed", false],
      ["pending", true],
      ["pending", false],
      ["pending", false],
    ]);
  });
});

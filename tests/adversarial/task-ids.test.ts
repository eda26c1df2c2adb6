import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { rm, writeFile } from "node:fs/promises";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// Task ids are never reused, whatever happened to the board: a stale call naming a lost task must not land on a new one.

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
const LEADER = "ses_lead";

type Res = { success: boolean; error?: string; warnings?: string[]; task?: { id: string; status: string } };

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, LEADER);
  await addAgent(ctx, "alpha", { sessionId: "ses_w" });
});
afterEach(() => ctx.cleanup());

const create = (title: string) => call<Res>("create-task", { teamName: "alpha", title }, LEADER);

async function loseBoardThenProbe(lose: () => Promise<void>): Promise<void> {
  const old = [(await create("a")).task?.id, (await create("b")).task?.id, (await create("c")).task?.id];
  expect(old).toEqual(["task-1", "task-2", "task-3"]);
  await lose();
  const fresh: string[] = [];
  for (const title of ["x", "y", "z", "w"]) {
    const made = await create(title);
    expect(made.success).toBe(true);
    fresh.push(made.task?.id ?? "");
  }
  expect(fresh.filter((id) => old.includes(id))).toEqual([]);
  expect(new Set(fresh).size).toBe(fresh.length);
  // A worker still holding an id of the lost board completes nothing.
  const stale = await call<Res>(
    "update-task",
    { teamName: "alpha", taskId: "task-1", status: "completed" },
    "ses_w",
  );
  expect(stale.success).toBe(false);
  expect(stale.error).toContain("not found");
  const board = await ctx.store.readTasks("alpha");
  expect(board.kind === "ok" && board.value.tasks.every((t) => t.status === "pending")).toBe(true);
}

describe("task ids after the board was lost", () => {
  test("damaged (garbage) board: new ids differ from every old one", async () => {
    await loseBoardThenProbe(() => writeFile(ctx.store.paths.tasks("alpha"), "\u0000garbage{"));
  });

  test("deleted board: new ids differ from every old one", async () => {
    await loseBoardThenProbe(() => rm(ctx.store.paths.tasks("alpha")));
  });

  test("a board lost twice starts two different series", async () => {
    await create("a");
    await rm(ctx.store.paths.tasks("alpha"));
    const first = (await create("b")).task?.id ?? "";
    await rm(ctx.store.paths.tasks("alpha"));
    const second = (await create("c")).task?.id ?? "";
    expect(first).toMatch(/^task-[0-9a-z]{5}-1$/);
    expect(second).toMatch(/^task-[0-9a-z]{5}-1$/);
    expect(first).not.toBe(second);
  });

  test("the loss is reported in the result of the call that found it", async () => {
    await create("a");
    await writeFile(ctx.store.paths.tasks("alpha"), "not json");
    const made = await create("b");
    expect(made.warnings?.join(" ")).toContain("ids of the lost board are never reused");
  });
});

describe("a valid board whose counter is behind its tasks (a hand edit, an older copy put back)", () => {
  async function rewind(nextId: number): Promise<void> {
    const read = await ctx.store.readTasks("alpha");
    if (read.kind !== "ok") throw new Error(`board unreadable: ${read.kind}`);
    await writeFile(ctx.store.paths.tasks("alpha"), JSON.stringify({ ...read.value, nextId }));
  }

  test("the next id moves past every id of the board", async () => {
    for (const title of ["a", "b", "c"]) await create(title);
    await rewind(1);
    const made = await create("x");
    expect(made.task?.id).toBe("task-4");
    const board = await ctx.store.readTasks("alpha");
    expect(board.kind === "ok" && board.value.tasks.map((t) => t.id)).toEqual([
      "task-1",
      "task-2",
      "task-3",
      "task-4",
    ]);
    expect(board.kind === "ok" && board.value.nextId).toBe(5);
  });

  test("a board of a later series moves past that series' ids only", async () => {
    await rm(ctx.store.paths.tasks("alpha"));
    const first = (await create("a")).task?.id ?? "";
    await create("b");
    const series = first.split("-")[1];
    await rewind(1);
    expect((await create("c")).task?.id).toBe(`task-${series}-3`);
  });

  test("an id that is on the board twice is refused, not updated at random", async () => {
    await create("a");
    await create("b");
    const read = await ctx.store.readTasks("alpha");
    if (read.kind !== "ok") throw new Error("board unreadable");
    const [a, b] = read.value.tasks;
    if (!a || !b) throw new Error("tasks missing");
    await writeFile(
      ctx.store.paths.tasks("alpha"),
      JSON.stringify({ ...read.value, tasks: [a, { ...b, id: a.id }] }),
    );
    const before = await Bun.file(ctx.store.paths.tasks("alpha")).text();
    const update = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "completed" },
      LEADER,
    );
    expect(update.success).toBe(false);
    expect(update.error).toContain("Task id 'task-1' is on the board of team 'alpha' 2 times");
    expect(await Bun.file(ctx.store.paths.tasks("alpha")).text()).toBe(before);
  });
});

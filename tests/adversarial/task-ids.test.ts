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

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readdir, writeFile } from "node:fs/promises";
import { v4 as uuidv4 } from "uuid";
import { reassignTasksOf } from "../../src/operations/team/task.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
});
afterEach(() => ctx.cleanup());

type Res = { success: boolean; error?: string; [key: string]: unknown };

async function addWorker(teamName: string, sessionId: string, name = "worker-1"): Promise<string> {
  return (await addAgent(ctx, teamName, { sessionId, name })).agentId;
}

describe("create-team", () => {
  test("the caller becomes leader and is listed as a member", async () => {
    const result = await call<Res & { leaderAgentId: string }>(
      "create-team",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(result.success).toBe(true);
    expect(result.title).toContain("alpha");
    const team = await ctx.store.readTeam("alpha");
    if (team.kind !== "ok") throw new Error("team missing");
    expect(team.value.leader).toBe(result.leaderAgentId);
    expect(team.value.leaderSessionId).toBe("ses_lead");
    expect(team.value.members).toEqual([
      expect.objectContaining({ agentId: result.leaderAgentId, role: "leader" }),
    ]);
    const leader = await ctx.store.readAgent("alpha", result.leaderAgentId);
    expect(leader.kind === "ok" && leader.value.role).toBe("leader");
    expect(leader.kind === "ok" && leader.value.sessionId).toBe("ses_lead");
  });

  test("an existing team is refused and left as it was", async () => {
    await call("create-team", { teamName: "alpha" }, "ses_1");
    const again = await call<Res>("create-team", { teamName: "alpha" }, "ses_2");
    expect(again).toMatchObject({ success: false, error: "Team 'alpha' already exists" });
    const team = await ctx.store.readTeam("alpha");
    expect(team.kind === "ok" && team.value.leaderSessionId).toBe("ses_1");
  });

  test("concurrent creates of one team: exactly one wins", async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call<Res>("create-team", { teamName: "race" }, `ses_${i}`)),
    );
    expect(results.filter((r) => r.success)).toHaveLength(1);
  });

  test.each(["../evil", "", "a/b", "x".repeat(10_000), "bad\u0001name", "/abs"])(
    "hostile team name #%# gets a clear error and touches nothing",
    async (teamName) => {
      const result = await call<Res>("create-team", { teamName }, "ses_1").catch((e: Error) => ({
        success: false,
        error: `schema: ${e.message}`,
      }));
      expect(result.success).toBe(false);
      expect(await readdir(ctx.store.paths.root)).toEqual([".gitignore"]);
    },
  );

  test("a malformed defaultModel is refused", async () => {
    const result = await call<Res>("create-team", { teamName: "m", defaultModel: "no-slash" }, "ses_1");
    expect(result.success).toBe(false);
    expect(result.error).toContain("provider/model");
  });
});

describe("task board", () => {
  let workerId = "";
  beforeEach(async () => {
    await call("create-team", { teamName: "alpha" }, "ses_lead");
    workerId = await addWorker("alpha", "ses_w1");
  });

  test("members create, claim, complete and list tasks", async () => {
    const created = await call<Res & { task: { id: string; status: string } }>(
      "create-task",
      { teamName: "alpha", title: "Write docs" },
      "ses_lead",
    );
    expect(created.task).toMatchObject({ id: "task-1", status: "pending" });
    const claimed = await call<Res & { task: { assignee: string } }>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "in_progress" },
      "ses_w1",
    );
    expect(claimed.task.assignee).toBe(workerId);
    const listed = await call<Res & { tasks: unknown[] }>(
      "list-tasks",
      { teamName: "alpha", assignee: workerId, status: "in_progress" },
      "ses_lead",
    );
    expect(listed.tasks).toHaveLength(1);
    const done = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "completed" },
      "ses_w1",
    );
    expect(done.success).toBe(true);
  });

  test("statuses only move forward", async () => {
    await call("create-task", { teamName: "alpha", title: "t" }, "ses_lead");
    await call("update-task", { teamName: "alpha", taskId: "task-1", status: "completed" }, "ses_lead");
    const back = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "pending" },
      "ses_lead",
    );
    expect(back.success).toBe(false);
    expect(back.error).toContain("only moves forward");
  });

  test("a non-member is refused and nothing changes", async () => {
    const result = await call<Res>("create-task", { teamName: "alpha", title: "x" }, "ses_stranger");
    expect(result.success).toBe(false);
    expect(result.error).toContain("not a member");
    const board = await ctx.store.readTasks("alpha");
    expect(board.kind === "ok" && board.value.tasks).toEqual([]);
    const listed = await call<Res>("list-tasks", { teamName: "alpha" }, "ses_stranger");
    expect(listed.success).toBe(false);
  });

  test("a worker cannot take over another agent's task", async () => {
    const other = await addWorker("alpha", "ses_w2", "worker-2");
    await call("create-task", { teamName: "alpha", title: "t", assignee: other }, "ses_lead");
    const result = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "in_progress" },
      "ses_w1",
    );
    expect(result.success).toBe(false);
    expect(result.error).toContain("assigned to agent");
  });

  test("unknown team, task and assignee get clear errors", async () => {
    expect(await call<Res>("list-tasks", { teamName: "nope" }, "ses_lead")).toMatchObject({
      success: false,
      error: "Team 'nope' does not exist",
    });
    expect(
      (
        await call<Res>(
          "update-task",
          { teamName: "alpha", taskId: "task-9", status: "completed" },
          "ses_lead",
        )
      ).error,
    ).toContain("not found");
    expect(
      (await call<Res>("create-task", { teamName: "alpha", title: "t", assignee: uuidv4() }, "ses_lead"))
        .error,
    ).toContain("not a member");
    expect(
      (await call<Res>("create-task", { teamName: "alpha", title: "t", assignee: "../x" }, "ses_lead")).error,
    ).toContain("Invalid agent id");
  });

  test("a damaged task board is reported and the board starts again", async () => {
    await writeFile(ctx.store.paths.tasks("alpha"), "{torn");
    const listed = await call<Res & { tasks: unknown[]; warnings: string[] }>(
      "list-tasks",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(listed.success).toBe(true);
    expect(listed.tasks).toEqual([]);
    expect(listed.warnings[0]).toContain("moved aside");
    const created = await call<Res>("create-task", { teamName: "alpha", title: "again" }, "ses_lead");
    expect(created.success).toBe(true);
  });

  test("a dead agent's in_progress tasks go back to pending in one write", async () => {
    await call("create-task", { teamName: "alpha", title: "a" }, "ses_lead");
    await call("create-task", { teamName: "alpha", title: "b" }, "ses_lead");
    await call("update-task", { teamName: "alpha", taskId: "task-1", status: "in_progress" }, "ses_w1");
    await call("update-task", { teamName: "alpha", taskId: "task-2", status: "completed" }, "ses_w1");
    const moved = await reassignTasksOf(ctx, "alpha", [workerId], "agent became inactive");
    expect(moved.get(workerId)).toEqual(["task-1"]);
    const board = await ctx.store.readTasks("alpha");
    if (board.kind !== "ok") throw new Error("board missing");
    expect(board.value.tasks[0]).toMatchObject({
      status: "pending",
      assignee: null,
      reassignedReason: "agent became inactive",
    });
    expect(board.value.tasks[1]).toMatchObject({ status: "completed" });
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// Only a running agent may own unfinished work: nothing hands back the tasks of an agent that already ended.

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
const LEADER = "ses_lead";

type Res = {
  success: boolean;
  error?: string;
  task?: { id: string; status: string; assignee: string | null };
};

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, LEADER);
});
afterEach(() => ctx.cleanup());

async function board() {
  const read = await ctx.store.readTasks("alpha");
  if (read.kind !== "ok") throw new Error("no board");
  return read.value.tasks;
}

async function newTask(title: string, assignee?: string): Promise<Res> {
  return call<Res>("create-task", { teamName: "alpha", title, ...(assignee ? { assignee } : {}) }, LEADER);
}

const ended: [string, Partial<AgentState>][] = [
  ["inactive", { status: "inactive", statusReason: "no heartbeat for 2 sweeps" }],
  ["terminated", { status: "terminated", outcome: "killed" }],
  ["shutting_down", { status: "shutting_down" }],
];

describe("the leader cannot give work to an agent that is not running", () => {
  test.each(ended)("create-task assigned to a %s agent is refused", async (_, state) => {
    const gone = await addAgent(ctx, "alpha", { sessionId: "ses_gone", ...state });
    const result = await newTask("parser", gone.agentId);
    expect(result.success).toBe(false);
    expect(result.error).toContain("cannot take tasks. Assign a running agent (see list-agents)");
    expect(await board()).toEqual([]);
  });

  test.each(ended)("update-task assigning to a %s agent is refused", async (_, state) => {
    const gone = await addAgent(ctx, "alpha", { sessionId: "ses_gone", ...state });
    const id = (await newTask("parser")).task?.id ?? "";
    for (const status of ["pending", "in_progress"]) {
      const result = await call<Res>(
        "update-task",
        { teamName: "alpha", taskId: id, status, assignee: gone.agentId },
        LEADER,
      );
      expect(result.success).toBe(false);
      expect(result.error).toContain(`(${gone.agentId})`);
      expect(result.error).toContain("cannot take tasks");
    }
    expect((await board())[0]).toMatchObject({ status: "pending", assignee: null });
  });

  test("a running agent can still be assigned, and a task of an ended agent can still be completed", async () => {
    const worker = await addAgent(ctx, "alpha", { sessionId: "ses_w" });
    const assigned = await newTask("parser", worker.agentId);
    expect(assigned.success).toBe(true);
    await ctx.store.updateAgent("alpha", worker.agentId, (s) => (s ? { ...s, status: "terminated" } : s));
    const done = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: assigned.task?.id, status: "completed" },
      LEADER,
    );
    expect(done.success).toBe(true);
  });
});

describe("an agent declared inactive is told to stop, not given work", () => {
  test("claiming a task (update-task in_progress) is refused with what to do", async () => {
    const id = (await newTask("parser")).task?.id ?? "";
    const lost = await addAgent(ctx, "alpha", {
      sessionId: "ses_lost",
      status: "inactive",
      statusReason: "no heartbeat for 2 sweeps",
    });
    const result = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: id, status: "in_progress" },
      "ses_lost",
    );
    expect(result.success).toBe(false);
    expect(result.error).toContain("You were declared inactive (no heartbeat for 2 sweeps)");
    expect(result.error).toContain(`ask the team leader to resume you (resume-agent ${lost.agentId})`);
    expect((await board())[0]).toMatchObject({ status: "pending", assignee: null });
  });

  test("creating a task is refused the same way", async () => {
    await addAgent(ctx, "alpha", { sessionId: "ses_lost", status: "inactive" });
    const result = await call<Res>("create-task", { teamName: "alpha", title: "more" }, "ses_lost");
    expect(result.success).toBe(false);
    expect(result.error).toContain("You were declared inactive");
    expect(await board()).toEqual([]);
  });

  test("an agent shutting down cannot claim new work", async () => {
    const id = (await newTask("parser")).task?.id ?? "";
    await addAgent(ctx, "alpha", { sessionId: "ses_bye", status: "shutting_down" });
    const result = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: id, status: "in_progress" },
      "ses_bye",
    );
    expect(result.success).toBe(false);
    expect(result.error).toContain("confirm-shutdown");
  });
});

/**
 * The task board against a real `opencode serve` and the scripted mock model: every board change is a tool call a
 * session makes through the plugin in the server (the model's `@@call`). The fixture server is the project's server and
 * holds every session, the leader's too; workers are registered as spawn leaves headless agents (spawn itself is
 * tested in spawn-kill.test.ts), on real sessions of that server.
 */
import { expect, test } from "bun:test";
import type { TeamsContext } from "../../src/operations/context.ts";
import type { InboxMessage, Task } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { builtContext } from "../helpers/context.ts";
import { recordServerInfo, useRecordedProjectServer } from "../helpers/server-info.ts";
import { useOpencode, waitFor } from "./harness/index.ts";
import { callTool, toolPrompt } from "./harness/session-tools.ts";

const fx = useOpencode({
  // The test records this server as the project's (it has no password): a prewarm would take it for one an older
  // version left unprotected and replace it.
  pluginOptions: { background: false, prewarmServer: false },
  waitForTools: ["create-task", "claim-task", "update-task", "list-tasks", "kill-agent"],
});

const TEAM = "plan";
type View = Task & { blocks: string[]; ready: boolean };
type Claimed = { success: boolean; task: View | null; note?: string };
type Updated = { success: boolean; error?: string; task: View; nowReady?: string[] };

function context(): TeamsContext {
  const ctx = builtContext(
    fx.server.projectDir,
    { background: false },
    "every session is on the project server",
  );
  return useRecordedProjectServer(ctx);
}

test("real server: a plan of four, two workers claim, the dependent task waits for both, a killed worker's task is finished by the other", async () => {
  const server = fx.server;
  const ctx = context();
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  const leader = await server.createSession("leader");
  const created = (await callTool(server, leader, "create-team", { teamName: TEAM })) as {
    leaderAgentId: string;
  };
  const workers = [];
  for (const name of ["w1", "w2"]) {
    const sessionId = await server.createSession(name);
    workers.push(await addAgent(ctx, TEAM, { name, sessionId, prompt: "take work with claim-task" }));
  }
  const [w1, w2] = workers as [(typeof workers)[0], (typeof workers)[0]];
  const as = (sessionId: string, tool: string, args: Record<string, unknown>) =>
    callTool(server, sessionId, tool, { teamName: TEAM, ...args });
  const inbox = async (agentId: string): Promise<InboxMessage[]> =>
    (await ctx.store.readInbox(TEAM, agentId)).items;

  // The leader plans the graph in one call: the API waits for the migration and the fixtures; the schema docs wait for
  // the migration and are reserved for w2.
  const plan = (await as(leader, "create-task", {
    tasks: [
      { ref: "db", title: "Write the migration" },
      { ref: "fixtures", title: "Write the fixtures" },
      { ref: "api", title: "Write the API", blockedBy: ["db", "fixtures"] },
      { ref: "docs", title: "Document the schema", blockedBy: ["db"], assignee: w2.agentId },
    ],
  })) as { success: boolean; tasks: View[] };
  expect(plan.tasks.map((t) => [t.id, t.blockedBy, t.ready])).toEqual([
    ["task-1", [], true],
    ["task-2", [], true],
    ["task-3", ["task-1", "task-2"], false],
    ["task-4", ["task-1"], false],
  ]);

  // Two workers take the ready ones.
  expect(((await as(w1.sessionId, "claim-task", {})) as Claimed).task).toMatchObject({
    id: "task-1",
    assignee: w1.agentId,
  });
  expect(((await as(w2.sessionId, "claim-task", {})) as Claimed).task).toMatchObject({
    id: "task-2",
    assignee: w2.agentId,
  });
  const blocked = (await as(w1.sessionId, "update-task", {
    taskId: "task-3",
    status: "in_progress",
  })) as Updated;
  expect(blocked.error).toContain("Task 'task-3' waits for task-1 (in_progress), task-2 (in_progress)");

  // w1 finishes the migration: the docs (w2's) become ready and w2 is told in its session; the API still waits.
  const firstDone = (await as(w1.sessionId, "update-task", {
    taskId: "task-1",
    status: "completed",
  })) as Updated;
  expect(firstDone.nowReady).toEqual(["task-4"]);
  await waitFor(
    () =>
      fx.mock.requests.some(
        (r) =>
          r.sessionId === w2.sessionId &&
          r.lastUserText.includes("Ready for you now") &&
          r.lastUserText.includes("task-4"),
      ),
    { timeoutMs: 15_000, message: "w2's model to see its ready task" },
  );
  await server.waitForIdle(w2.sessionId, { timeoutMs: 15_000 });
  const nothing = (await as(w1.sessionId, "claim-task", {})) as Claimed;
  expect(nothing.task).toBeNull();
  expect(nothing.note).toContain("1 wait for other tasks to complete and 1 are reserved for other agents");

  // w2 finishes the fixtures: now the API is ready, the leader is told, and the next free worker (w1) gets it.
  const secondDone = (await as(w2.sessionId, "update-task", {
    taskId: "task-2",
    status: "completed",
  })) as Updated;
  expect(secondDone.nowReady).toEqual(["task-3"]);
  const notices = (await inbox(created.leaderAgentId)).map((m) => m.text);
  expect(notices).toContainEqual(expect.stringContaining("Tasks now ready after w1's update: task-4"));
  expect(notices).toContainEqual(
    expect.stringContaining('Tasks now ready after w2\'s update: task-3 "Write the API"'),
  );
  expect(((await as(w1.sessionId, "claim-task", {})) as Claimed).task).toMatchObject({
    id: "task-3",
    assignee: w1.agentId,
  });

  // w2 takes its reserved docs task and is killed in the middle of the work (its model turn still running).
  await server.promptAsync(
    w2.sessionId,
    `${toolPrompt("claim-task", { teamName: TEAM })}\n@@wait w2-never-finishes`,
  );
  await waitFor(async () => (await server.toolResults(w2.sessionId, "claim-task")).length === 2, {
    timeoutMs: 15_000,
    message: "w2's second claim",
  });
  await waitFor(() => fx.mock.inFlight > 0, { timeoutMs: 15_000, message: "w2 at work" });
  const [, secondClaim] = await server.toolResults(w2.sessionId, "claim-task");
  expect(JSON.parse(secondClaim?.output ?? "{}").task).toMatchObject({ id: "task-4", status: "in_progress" });
  const killed = (await as(leader, "kill-agent", { agentId: w2.agentId, force: true, reason: "stuck" })) as {
    success: boolean;
    reassignedTasks: string[];
  };
  expect(killed).toMatchObject({ success: true, reassignedTasks: ["task-4"] });
  const listed = (await as(leader, "list-tasks", {})) as { tasks: View[] };
  expect(listed.tasks.find((t) => t.id === "task-4")).toMatchObject({
    status: "pending",
    assignee: null,
    blockedBy: ["task-1"],
    ready: true,
  });

  // w1 finishes the API, then takes the docs task w2 gave back and finishes it too.
  await as(w1.sessionId, "update-task", { taskId: "task-3", status: "completed" });
  expect(((await as(w1.sessionId, "claim-task", {})) as Claimed).task).toMatchObject({
    id: "task-4",
    assignee: w1.agentId,
  });
  await as(w1.sessionId, "update-task", { taskId: "task-4", status: "completed" });
  const final = (await as(leader, "list-tasks", {})) as { tasks: View[] };
  expect(final.tasks.map((t) => [t.id, t.status, t.assignee])).toEqual([
    ["task-1", "completed", w1.agentId],
    ["task-2", "completed", w2.agentId],
    ["task-3", "completed", w1.agentId],
    ["task-4", "completed", w1.agentId],
  ]);
  fx.mock.open("w2-never-finishes");
}, 180_000);

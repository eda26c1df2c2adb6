/**
 * A subagent an agent starts (its task tool) runs in a child session (`parentID` is the agent's session): its requests
 * are the agent's waitingFor, told to the leader once and answered on the child's session; its work is the agent's
 * sign of life; its idle, error and deletion are not the agent's (specs/heartbeat.md "Subagents' sessions"). The
 * real-server version is tests/e2e/subagent-permission.test.ts.
 */
import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { runAnswer } from "../../src/cli/answer.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, leaderInbox, ledTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;
afterEach(() => ctx?.cleanup());

const LEADER = "ses_lead";

function bash(sessionID: string, id: string, command: string) {
  return { id, sessionID, permission: "bash", patterns: [command], always: [command], metadata: {} };
}

const event = (type: string, properties: object) => ({ type, properties }) as unknown as Event;

async function send(monitor: EventMonitor, ...events: Event[]): Promise<void> {
  for (const item of events) monitor.handleEvent(item);
  await monitor.settled();
}

/** A busy worker, and a child session its task tool started, known to the server only. */
async function workerWithChild(): Promise<{ agent: AgentState; child: string; monitor: EventMonitor }> {
  ({ ctx, call } = await ledTeamContext());
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { sessionId: session.id });
  const child = ctx.server.addSession({ activity: "busy", parentID: session.id }).id;
  const monitor = new EventMonitor(ctx);
  await send(monitor, event("session.status", { sessionID: session.id, status: { type: "busy" } }));
  return { agent, child, monitor };
}

test("a subagent's request is the agent's: waitingFor, one notice, answered on the child's session", async () => {
  const { agent, child, monitor } = await workerWithChild();
  const asked = bash(child, "per_child", "rm -rf build");
  await send(monitor, event("permission.asked", asked), event("permission.asked", asked));
  const waiting = (await agentOnDisk(ctx, agent)).waitingFor;
  expect(waiting).toMatchObject({ requestId: "per_child", sessionId: child, pattern: "rm -rf build" });
  const notices = (await leaderInbox(ctx)).filter((m) => m.text.includes("per_child"));
  expect(notices).toHaveLength(1);
  expect(notices[0]?.text).toContain(
    "is waiting, on behalf of a subagent it started, for permission: bash (rm -rf build)",
  );

  ctx.server.pending = [{ kind: "permission", properties: asked }];
  const answered = await call<{ success: boolean; error?: string }>(
    "answer-permission",
    { teamName: "alpha", agentId: agent.agentId, requestId: "per_child", response: "once" },
    LEADER,
  );
  expect(answered.success).toBe(true);
  expect(ctx.server.answers.map((a) => [a.request.sessionId, a.request.requestId, a.response])).toEqual([
    [child, "per_child", "once"],
  ]);
  await send(
    monitor,
    event("permission.replied", { sessionID: child, requestID: "per_child", reply: "once" }),
  );
  expect((await agentOnDisk(ctx, agent)).waitingFor ?? null).toBeNull();
});

test("a grandchild learned from session.created events counts too, without asking the server", async () => {
  const { agent, child, monitor } = await workerWithChild();
  await send(
    monitor,
    event("session.created", { info: { id: "ses_grandchild", parentID: child, title: "sub-sub" } }),
    event("permission.asked", bash("ses_grandchild", "per_deep", "make")),
  );
  expect((await agentOnDisk(ctx, agent)).waitingFor).toMatchObject({
    requestId: "per_deep",
    sessionId: "ses_grandchild",
  });
});

test("a subagent's idle while the agent's own turn runs leaves it active, and clears only the child's request", async () => {
  const { agent, child, monitor } = await workerWithChild();
  await send(monitor, event("permission.asked", bash(child, "per_child", "ls")));
  expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_child");
  await send(monitor, event("session.idle", { sessionID: child }));
  const after = await agentOnDisk(ctx, agent);
  expect(after.status).toBe("active");
  expect(after.waitingFor ?? null).toBeNull();
  await send(monitor, event("permission.asked", bash(agent.sessionId, "per_own", "ls")));
  await send(monitor, event("session.idle", { sessionID: child }));
  expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_own");
});

test("a subagent's work makes an idle agent active, and its idle makes it idle again", async () => {
  const { agent, child, monitor } = await workerWithChild();
  await send(monitor, event("session.idle", { sessionID: agent.sessionId }));
  expect((await agentOnDisk(ctx, agent)).status).toBe("idle");
  await send(monitor, event("session.status", { sessionID: child, status: { type: "busy" } }));
  expect((await agentOnDisk(ctx, agent)).status).toBe("active");
  await send(monitor, event("session.idle", { sessionID: child }));
  expect((await agentOnDisk(ctx, agent)).status).toBe("idle");
});

test("a subagent's error is not the agent's model failure, and its deletion is not the agent's death", async () => {
  const { agent, child, monitor } = await workerWithChild();
  const error = { name: "APIError", data: { message: "invalid api key", statusCode: 401 } };
  await send(
    monitor,
    event("session.error", { sessionID: child, error }),
    event("session.deleted", { info: { id: child, parentID: agent.sessionId } }),
  );
  const after = await agentOnDisk(ctx, agent);
  expect(after.status).toBe("active");
  expect(after.lastError).toBeUndefined();
  expect(after.failing ?? null).toBeNull();
});

test("a resync keeps a subagent's request the server still lists, and finds one the stream lost", async () => {
  const { agent, child, monitor } = await workerWithChild();
  ctx.server.pending = [{ kind: "permission", properties: bash(child, "per_lost", "git push") }];
  await monitor.resync(ctx.server);
  expect((await agentOnDisk(ctx, agent)).waitingFor).toMatchObject({
    requestId: "per_lost",
    sessionId: child,
  });
  await monitor.resync(ctx.server);
  expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_lost");
  ctx.server.pending = [];
  await monitor.resync(ctx.server);
  expect((await agentOnDisk(ctx, agent)).waitingFor ?? null).toBeNull();
});

test("the CLI's approve shows a subagent's request as the agent's and answers it on the child's session", async () => {
  const { agent, child } = await workerWithChild();
  ctx.server.pending = [{ kind: "permission", properties: bash(child, "per_cli", "npm publish") }];
  const printed: string[] = [];
  const code = await runAnswer(
    ctx,
    "approve",
    ["alpha", agent.agentId],
    { always: false },
    (text) => printed.push(text),
    async () => true,
  );
  expect(code).toBe(0);
  expect(printed[0]).toContain("per_cli");
  expect(printed[0]).toContain("npm publish");
  expect(ctx.server.answers.map((a) => [a.request.sessionId, a.request.requestId, a.response])).toEqual([
    [child, "per_cli", "once"],
  ]);
});

test("a server that cannot be asked: signs of life wait 5 s before asking again, a request asks at once", async () => {
  const { agent, child, monitor } = await workerWithChild();
  ctx.server.down = true;
  const busy = event("session.status", { sessionID: child, status: { type: "busy" } });
  await send(monitor, busy, busy, busy);
  const asked = () => ctx.server.calls.filter((c) => c === `sessionParent ${child}`).length;
  expect(asked()).toBe(1);
  ctx.server.down = false;
  await send(monitor, event("permission.asked", bash(child, "per_late", "ls")));
  expect((await agentOnDisk(ctx, agent)).waitingFor).toMatchObject({
    requestId: "per_late",
    sessionId: child,
  });
  expect(asked()).toBe(2);
});

/**
 * `opencode-teams approve|deny` as the human runs them, answered through the project server (the fake one): the
 * refusals are in cli.test.ts, which has no server; here the answer reaches the server for the pending request.
 */
import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { runAnswer } from "../../src/cli/answer.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leadTeam } from "../helpers/team.ts";

let ctx: TestContext;
afterEach(() => ctx?.cleanup());

async function waitingWorker(name: string, event: (sessionID: string) => Event) {
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { name, sessionId: session.id });
  const monitor = new EventMonitor(ctx);
  const asked = event(session.id) as unknown as { type: string; properties: Record<string, unknown> };
  monitor.handleEvent(asked);
  await monitor.settled();
  // The server lists what it asked as pending until it is answered.
  ctx.server.pending.push({ kind: asked.type.split(".")[0] as "permission", properties: asked.properties });
  return agent;
}

const permission = (sessionID: string, id = `per_${sessionID}`, pattern = "git push") =>
  ({
    type: "permission.asked",
    properties: {
      id,
      sessionID,
      permission: "bash",
      patterns: [pattern],
      metadata: {},
    },
  }) as unknown as Event;

const question = (sessionID: string) =>
  ({
    type: "question.asked",
    properties: { id: `que_${sessionID}`, sessionID, questions: [{ question: "Which branch?" }] },
  }) as unknown as Event;

test("approve --always, deny and approve --message show the request, ask, and reach the server for it", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const pusher = await waitingWorker("pusher", permission);
  const deleter = await waitingWorker("deleter", permission);
  const asker = await waitingWorker("asker", question);
  const printed: string[] = [];
  const print = (text: string) => printed.push(text);
  const asked: string[] = [];
  const yes = async (question: string) => {
    asked.push(question);
    return true;
  };

  expect(await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: true }, print, yes)).toBe(0);
  expect(await runAnswer(ctx, "deny", ["alpha", deleter.agentId], { always: false }, print, yes)).toBe(0);
  const message = { always: false, message: "main" };
  expect(await runAnswer(ctx, "approve", ["alpha", "asker"], message, print, yes)).toBe(0);

  expect(ctx.server.answers).toEqual([
    {
      request: { sessionId: pusher.sessionId, requestId: `per_${pusher.sessionId}`, directory: pusher.cwd },
      response: "always",
    },
    {
      request: {
        sessionId: deleter.sessionId,
        requestId: `per_${deleter.sessionId}`,
        directory: deleter.cwd,
      },
      response: "reject",
    },
    {
      request: { sessionId: asker.sessionId, requestId: `que_${asker.sessionId}`, directory: asker.cwd },
      response: "main",
    },
  ]);
  expect(printed.slice(0, 2)).toEqual([
    `Request of pusher (${pusher.agentId}): permission per_${pusher.sessionId}: bash (git push)`,
    `Answered permission per_${pusher.sessionId} of ${pusher.agentId}: always`,
  ]);
  expect(asked).toEqual(["Allow always? [y/N] ", "Refuse? [y/N] ", "Allow once? [y/N] "]);
});

test("not confirmed, or no terminal to confirm on and no --request: shown, nothing answered", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const pusher = await waitingWorker("pusher", permission);
  const printed: string[] = [];
  const print = (text: string) => printed.push(text);
  expect(
    await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: true }, print, async () => false),
  ).toBe(1);
  expect(printed.at(-1)).toContain("not answered.");
  expect(await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: true }, print)).toBe(1);
  expect(printed.at(-2)).toContain(`permission per_${pusher.sessionId}: bash (git push)`);
  expect(printed.at(-1)).toContain(`--request per_${pusher.sessionId}`);
  expect(ctx.server.answers).toHaveLength(0);
});

test("--request names the request; another id is refused naming what is pending, its pattern cut", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const long = `rm -rf / ${"x".repeat(3_000)}`;
  const pusher = await waitingWorker("pusher", (id) => permission(id, "per_now", long));
  const printed: string[] = [];
  const print = (text: string) => printed.push(text);

  const stale = await runAnswer(
    ctx,
    "approve",
    ["alpha", "pusher"],
    { always: true, request: "per_shown" },
    print,
  );
  expect(stale).toBe(1);
  expect(printed.join("\n")).toContain("'per_shown' is not pending");
  expect(printed.join("\n")).toContain("permission per_now: bash (rm -rf / xxx");
  expect(printed.join("\n").length).toBeLessThan(800);
  expect(ctx.server.answers).toHaveLength(0);

  printed.length = 0;
  expect(
    await runAnswer(ctx, "deny", ["alpha", "pusher"], { always: false, request: "per_now" }, print),
  ).toBe(0);
  expect(printed[0]).toStartWith(
    `Request of pusher (${pusher.agentId}): permission per_now: bash (rm -rf / xxx`,
  );
  expect(printed[0]).toContain("more characters)");
  expect(ctx.server.answers.map((a) => [a.request.requestId, a.response])).toEqual([["per_now", "reject"]]);
});

test("a request that changed between showing it and answering is refused, not answered unseen", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const pusher = await waitingWorker("pusher", (id) => permission(id, "per_read", "README.md"));
  const printed: string[] = [];
  // While the human reads per_read at the prompt, it is answered in the pane and the agent asks per_push.
  const push = permission(pusher.sessionId, "per_push", "git push -f").properties as Record<string, unknown>;
  const meanwhile = async () => {
    ctx.server.pending = [{ kind: "permission", properties: push }];
    return true;
  };
  expect(
    await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: true }, (t) => printed.push(t), meanwhile),
  ).toBe(1);
  expect(printed[0]).toContain("permission per_read: bash (README.md)");
  expect(printed[1]).toContain("'per_read'");
  expect(printed[1]).toContain("no longer pending");
  expect(printed[1]).toContain("permission per_push: bash (git push -f)");
  expect(ctx.server.answers).toHaveLength(0);
});

test("two requests pending and none named: both shown, nothing answered", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const pusher = await waitingWorker("pusher", (id) => permission(id, "per_a", "ls"));
  ctx.server.pending.push({
    kind: "permission",
    properties: permission(pusher.sessionId, "per_b", "git push").properties as Record<string, unknown>,
  });
  const printed: string[] = [];
  expect(
    await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: false }, (t) => printed.push(t)),
  ).toBe(1);
  expect(printed.join("\n")).toContain("--request");
  expect(printed.join("\n")).toContain("per_a");
  expect(printed.join("\n")).toContain("per_b");
  expect(ctx.server.answers).toHaveLength(0);
});

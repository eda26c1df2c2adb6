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
  monitor.handleEvent(event(session.id));
  await monitor.settled();
  return agent;
}

const permission = (sessionID: string) =>
  ({
    type: "permission.asked",
    properties: {
      id: `per_${sessionID}`,
      sessionID,
      permission: "bash",
      patterns: ["git push"],
      metadata: {},
    },
  }) as unknown as Event;

const question = (sessionID: string) =>
  ({
    type: "question.asked",
    properties: { id: `que_${sessionID}`, sessionID, questions: [{ question: "Which branch?" }] },
  }) as unknown as Event;

test("approve --always, deny and approve --message reach the server for the agent's pending request", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const pusher = await waitingWorker("pusher", permission);
  const deleter = await waitingWorker("deleter", permission);
  const asker = await waitingWorker("asker", question);
  const printed: string[] = [];
  const print = (text: string) => printed.push(text);

  expect(await runAnswer(ctx, "approve", ["alpha", "pusher"], { always: true }, print)).toBe(0);
  expect(await runAnswer(ctx, "deny", ["alpha", deleter.agentId], { always: false }, print)).toBe(0);
  expect(await runAnswer(ctx, "approve", ["alpha", "asker"], { always: false, message: "main" }, print)).toBe(
    0,
  );

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
  expect(printed[0]).toBe(`Answered permission per_${pusher.sessionId} of ${pusher.agentId}: always`);
});

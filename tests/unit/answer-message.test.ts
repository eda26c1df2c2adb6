/**
 * A message given with an answer reaches the agent, or the answer is refused: `deny --message 'no pushes, please'`
 * (the CLI's own example) used to refuse the request and drop the message, so the human believed the agent was told
 * why when it was not (specs/answer-permission.md).
 */
import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { runAnswer } from "../../src/cli/answer.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leaderInbox, leadTeam } from "../helpers/team.ts";

let ctx: TestContext;
afterEach(() => ctx?.cleanup());

async function waiting(kind: "permission" | "question") {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { name: "pusher", sessionId: session.id });
  const properties =
    kind === "permission"
      ? { id: "per_push", sessionID: session.id, permission: "bash", patterns: ["git push"], metadata: {} }
      : { id: "que_branch", sessionID: session.id, questions: [{ question: "Which branch?" }] };
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({ type: `${kind}.asked`, properties } as unknown as Event);
  await monitor.settled();
  ctx.server.pending.push({ kind, properties });
  return agent;
}

const printed: string[] = [];
const print = (text: string) => printed.push(text);

test("deny --message on a permission refuses it and tells the agent why", async () => {
  await waiting("permission");
  const flags = { always: false, message: "no pushes, please", request: "per_push" };
  expect(await runAnswer(ctx, "deny", ["alpha", "pusher"], flags, print)).toBe(0);
  expect(ctx.server.answers).toEqual([
    expect.objectContaining({ response: "reject", message: "no pushes, please" }),
  ]);
});

test("approve --message on a permission is refused: an approval carries no message", async () => {
  await waiting("permission");
  const flags = { always: false, message: "go ahead", request: "per_push" };
  expect(await runAnswer(ctx, "approve", ["alpha", "pusher"], flags, print)).toBe(1);
  expect(printed.at(-1)).toContain("carries no message");
  expect(ctx.server.answers).toHaveLength(0);
});

test("deny --message on a question is refused: a question's refusal carries no message", async () => {
  await waiting("question");
  const flags = { always: false, message: "ask later", request: "que_branch" };
  expect(await runAnswer(ctx, "deny", ["alpha", "pusher"], flags, print)).toBe(1);
  expect(printed.at(-1)).toContain("carries no message");
  expect(ctx.server.answers).toHaveLength(0);
});

/** A question tool call asking two questions at once, as OpenCode lists it. */
async function askingTwo() {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { name: "asker", sessionId: session.id });
  const properties = {
    id: "que_two",
    sessionID: session.id,
    questions: [{ question: "Which branch?" }, { question: "Run the slow tests?" }],
  };
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({ type: "question.asked", properties } as unknown as Event);
  await monitor.settled();
  ctx.server.pending.push({ kind: "question", properties });
  return agent;
}

test("two questions at once: one line per answer reaches each question; other text reaches both, none is left unanswered", async () => {
  const agent = await askingTwo();
  const lines = { always: false, message: "main\nyes", request: "que_two" };
  expect(await runAnswer(ctx, "approve", ["alpha", "asker"], lines, print)).toBe(0);
  expect(ctx.server.answers.at(-1)?.answers).toEqual(["main", "yes"]);

  const again = {
    id: "que_again",
    sessionID: agent.sessionId,
    questions: [{ question: "a" }, { question: "b" }],
  };
  ctx.server.pending.push({ kind: "question", properties: again });
  const one = { always: false, message: "main, and skip them", request: "que_again" };
  expect(await runAnswer(ctx, "approve", ["alpha", "asker"], one, print)).toBe(0);
  expect(ctx.server.answers.at(-1)?.answers).toEqual(["main, and skip them", "main, and skip them"]);
});

test("the notice of two questions says to answer one line each", async () => {
  await askingTwo();
  const notices = (await leaderInbox(ctx, "alpha")).map((message) => message.text).join("\n");
  expect(notices).toContain("Which branch? / Run the slow tests?");
  expect(notices).toContain("one line per question");
});

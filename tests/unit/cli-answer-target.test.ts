/**
 * `approve`/`deny` answer the agent named by its id, even when another running agent carries that id as its name
 * (a name is any 1-64 printable characters, a UUID included): the id is the one unambiguous way to name an agent.
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

async function asking(name: string, requestId: string, command: string) {
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { name, sessionId: session.id });
  const properties = {
    id: requestId,
    sessionID: session.id,
    permission: "bash",
    patterns: [command],
    metadata: {},
  };
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({ type: "permission.asked", properties } as unknown as Event);
  await monitor.settled();
  ctx.server.pending.push({ kind: "permission", properties });
  return agent;
}

test("an agent named like another agent's id never receives the answer meant for that id", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const meant = await asking("tests", "per_tests", "bun test");
  await asking(meant.agentId, "per_push", "git push --force");
  const printed: string[] = [];
  const yes = async () => true;
  expect(
    await runAnswer(ctx, "approve", ["alpha", meant.agentId], { always: false }, (t) => printed.push(t), yes),
  ).toBe(0);
  expect(printed[0]).toContain("per_tests");
  expect(ctx.server.answers.map((answer) => answer.request.requestId)).toEqual(["per_tests"]);
});

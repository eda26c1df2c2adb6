/**
 * resume-agent handed over every stored message without deliveredAt and marked them only after the launch: a crash
 * between the two, or a message whose delivery was attempted (and landed) before the agent died, was handed over again
 * into the same reused session. Now messages whose delivery was attempted and that the session shows are marked
 * delivered instead, and a resume marks its hand-over attempted before sending.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { deliverInboxMessage } from "../../src/operations/messages/delivery.ts";
import { InboxMessageSchema } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";
import { type Launched, markLost, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext, teamConfig } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ToolCall;
beforeEach(async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0 })));
afterEach(() => ctx.cleanup());

async function spawnThenStop(): Promise<{ agentId: string; sessionId: string }> {
  const spawned = await spawnHeadless(call, LEADER);
  await markLost(ctx, spawned.agentId);
  return spawned;
}

function seen(sessionId: string, text: string): number {
  return (
    ctx.server.sessions.get(sessionId)?.prompts.filter((prompt) => prompt.text.includes(text)).length ?? 0
  );
}

test("a resume that died between its prompt and marking does not hand the message over again", async () => {
  const first = await spawnThenStop();
  await call("send-message", { teamName: "alpha", to: first.agentId, message: "STEER-9" }, LEADER);
  const resumed = await call<Launched>("resume-agent", { teamName: "alpha", agentId: first.agentId }, LEADER);
  expect(resumed.success).toBe(true);
  expect(seen(first.sessionId, "STEER-9")).toBe(1);
  // The resuming process died after the prompt landed and before the mark: the file as it was before the mark.
  const [handed] = (await ctx.store.readInbox("alpha", first.agentId)).items;
  if (!handed) throw new Error("no message");
  const { deliveredAt: _, file, ...unmarked } = handed;
  // Before its mark a message is in its inbox's own directory (the mark moves it into delivered/).
  await rm(file);
  await writeJson(ctx.store.inboxMessageFile(unmarked), InboxMessageSchema, unmarked);

  await markLost(ctx, resumed.agentId);
  const again = await call<Launched>("resume-agent", { teamName: "alpha", agentId: resumed.agentId }, LEADER);
  expect(again.success).toBe(true);
  expect(seen(first.sessionId, "STEER-9")).toBe(1);
  expect((await ctx.store.readInbox("alpha", first.agentId)).items[0]?.deliveredAt).toBeDefined();
});

test("a message that reached the session before the agent died is not handed over again", async () => {
  const first = await spawnThenStop();
  await ctx.store.updateAgent("alpha", first.agentId, (s) => (s ? { ...s, status: "active" } : s));
  const team = await teamConfig(ctx);
  const message = await ctx.store.appendInbox({
    teamName: "alpha",
    to: first.agentId,
    from: team.leader,
    type: "message",
    text: "STEER-10",
    createdAt: new Date(ctx.clock.now()).toISOString(),
  });
  // The delivering process died between the send and the mark.
  const original = ctx.store.markInboxDelivered.bind(ctx.store);
  ctx.store.markInboxDelivered = async () => {
    throw new Error("crash");
  };
  await expect(deliverInboxMessage(ctx, team, message)).rejects.toThrow("crash");
  ctx.store.markInboxDelivered = original;
  expect(seen(first.sessionId, "STEER-10")).toBe(1);

  await markLost(ctx, first.agentId);
  const resumed = await call<Launched>("resume-agent", { teamName: "alpha", agentId: first.agentId }, LEADER);
  expect(resumed.success).toBe(true);
  expect(seen(first.sessionId, "STEER-10")).toBe(1);
  expect((await ctx.store.readInbox("alpha", first.agentId)).items[0]?.deliveredAt).toBeDefined();
});

/**
 * send-message and resume-agent as parallel tool calls: the send picked the old run (the record the resume was ending)
 * as recipient, the resume had already read the stored messages to hand over, and the message landed in the old run's
 * inbox, which no sweep scanned: it never reached the successor, though it runs on the same session. The sweep now
 * scans the inboxes of the runs each live agent resumes.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { deliverPending } from "../../src/operations/messages/notify.ts";
import { type Launched, markLost, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext, teamConfig } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ToolCall;
beforeEach(async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0 })));
afterEach(() => ctx.cleanup());

test("a message sent to the run a parallel resume is ending reaches the successor's session once", async () => {
  const spawned = await spawnHeadless(call, LEADER);
  await markLost(ctx, spawned.agentId);
  // send-message looked its recipient up before resume-agent ended the old record.
  const before = await ctx.store.listAgentViews("alpha");
  const resumed = await call<Launched>(
    "resume-agent",
    { teamName: "alpha", agentId: spawned.agentId },
    LEADER,
  );
  expect(resumed.success).toBe(true);
  const real = ctx.store.listAgentViews.bind(ctx.store);
  let once = true;
  ctx.store.listAgentViews = async (teamName: string) => {
    if (!once) return real(teamName);
    once = false;
    return before;
  };
  const sent = await call<{ success: boolean }>(
    "send-message",
    { teamName: "alpha", to: spawned.agentId, message: "STEER-42" },
    LEADER,
  );
  ctx.store.listAgentViews = real;
  expect(sent.success).toBe(true);
  const team = await teamConfig(ctx);
  for (let i = 0; i < 3; i++) await deliverPending(ctx, team, new Set());
  const session = ctx.server.sessions.get(resumed.sessionId);
  expect(session?.prompts.filter((prompt) => prompt.text.includes("STEER-42"))).toHaveLength(1);
  const [stored] = (await ctx.store.readInbox("alpha", spawned.agentId)).items;
  expect(stored?.deliveredAt).toBeDefined();
});

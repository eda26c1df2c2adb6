/**
 * send-message and resume-agent as parallel tool calls: the send picked the old run (the record the resume was ending)
 * as recipient, the resume had already read the stored messages to hand over, and the message landed in the old run's
 * inbox, which no sweep scanned: it never reached the successor, though it runs on the same session. The sweep now
 * scans the inboxes of the runs each live agent resumes.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { deliverPending } from "../../src/operations/messages/notify.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
beforeEach(async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0 });
  call = toolCaller(ctx);
  const team = await createTeam(ctx, { teamName: "alpha", defaultModel: "mock/mock-model" }, LEADER);
  if (!team.success) throw new Error(team.error);
});
afterEach(() => ctx.cleanup());

interface Launched {
  success: boolean;
  agentId: string;
  sessionId: string;
}

test("a message sent to the run a parallel resume is ending reaches the successor's session once", async () => {
  const spawned = await call<Launched>(
    "spawn-agent",
    { teamName: "alpha", prompt: "Build the parser", headless: true },
    LEADER,
  );
  await ctx.store.updateAgent("alpha", spawned.agentId, (s) =>
    s ? { ...s, status: "inactive", statusReason: "x" } : s,
  );
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
  const team = await ctx.store.readTeam("alpha");
  if (team.kind !== "ok") throw new Error("no team");
  for (let i = 0; i < 3; i++) await deliverPending(ctx, team.value, new Set());
  const session = ctx.server.sessions.get(resumed.sessionId);
  expect(session?.prompts.filter((prompt) => prompt.text.includes("STEER-42"))).toHaveLength(1);
  const [stored] = (await ctx.store.readInbox("alpha", spawned.agentId)).items;
  expect(stored?.deliveredAt).toBeDefined();
});

/**
 * One session can be a live agent record in several teams: a worker of team alpha that creates team beta is beta's
 * leader with the same session. The monitor's session index kept one record per session (the newest), so the
 * worker's own record in alpha heard nothing of its session and was declared dead. Events of a session reach every
 * live record of it, one per team.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const S = 1_000;
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let monitor: EventMonitor;

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
  monitor = new EventMonitor(ctx, { indexRebuildMs: 0 });
});
afterEach(() => ctx.cleanup());

async function state(teamName: string, agentId: string): Promise<AgentState> {
  const read = await ctx.store.readAgent(teamName, agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

const busy = (sessionID: string) => ({
  type: "session.status",
  properties: { sessionID, status: { type: "busy" } },
});

test("a worker that leads its own team: its session's events reach its worker record and its leader record", async () => {
  const worker = await addAgent(ctx, "alpha", { name: "planner", status: "idle" });
  ctx.clock.advance(5 * S);
  const beta = await call<{ success: boolean; leaderAgentId: string }>(
    "create-team",
    { teamName: "beta" },
    worker.sessionId,
  );
  expect(beta.success).toBe(true);

  ctx.clock.advance(60 * S);
  monitor.handleEvent(busy(worker.sessionId));
  await monitor.settled();

  const beat = new Date(ctx.clock.now()).toISOString();
  expect(await state("alpha", worker.agentId)).toMatchObject({
    status: "active",
    heartbeatTs: beat,
    heartbeatSource: "sdk_session_status",
  });
  expect((await ctx.store.readHeartbeat("beta", beta.leaderAgentId)).record?.heartbeatTs).toBe(beat);
});

test("within one team only the live record of a resumed session hears it; other teams' records still do", async () => {
  const old = await addAgent(ctx, "alpha", { name: "w", status: "terminated", outcome: "interrupted" });
  const successor = await addAgent(ctx, "alpha", {
    name: "w",
    sessionId: old.sessionId,
    resumes: old.agentId,
    status: "idle",
  });
  await call("create-team", { teamName: "gamma" }, "ses_lead_gamma");
  const inGamma = await addAgent(ctx, "gamma", { name: "also", sessionId: old.sessionId, status: "idle" });

  ctx.clock.advance(30 * S);
  monitor.handleEvent(busy(old.sessionId));
  await monitor.settled();

  expect((await state("alpha", successor.agentId)).status).toBe("active");
  expect((await state("gamma", inGamma.agentId)).status).toBe("active");
  expect(await state("alpha", old.agentId)).toMatchObject({
    status: "terminated",
    heartbeatTs: old.heartbeatTs,
  });
});

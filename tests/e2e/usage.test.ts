/**
 * Usage and budgets against a real `opencode serve` whose mock model is priced in opencode.json ($1000 per million
 * input tokens, $2000 per million output tokens) and reports 10 prompt + 5 completion tokens on every answer, so
 * every model call costs exactly $0.02 and 15 tokens.
 *
 * Who plays whom (as in liveness.test.ts): the fixture server is the project's `opencode serve`, holding the leader's
 * and the agents' sessions; its own plugin runs no background loops. This test process is the leader's OpenCode: it
 * builds the plugin's context against the fixture, spawns and resumes headless agents through the operations, and
 * runs the background monitor that counts usage and enforces budgets. Stopping that monitor and starting another is
 * the leader's process restarting.
 */
import { afterAll, expect, test } from "bun:test";
import { UnavailableOpencodeApi } from "../../src/edges/unavailable.ts";
import { resumeAgent } from "../../src/operations/agents/resume.ts";
import { spawnAgent } from "../../src/operations/agents/spawn.ts";
import type { TeamsContext } from "../../src/operations/context.ts";
import { type LivenessHandle, startLiveness } from "../../src/operations/liveness/background.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { parseOptions } from "../../src/options.ts";
import { buildContext } from "../../src/plugin.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { recordServerInfo, useRecordedProjectServer } from "../helpers/server-info.ts";
import { pricedMockProvider, useOpencode, waitFor } from "./harness/index.ts";

const OPTIONS = { background: false, eventCoalesceMs: 200, maxAgents: 2, promptRetryDelayMs: 500 };
const fx = useOpencode({
  pluginOptions: { background: false },
  config: { provider: pricedMockProvider() },
  waitForTools: ["list-tasks"],
});
const TEAM = "spend";

let liveness: LivenessHandle | undefined;
afterAll(async () => {
  await liveness?.release();
});

function context(): TeamsContext {
  const ctx = buildContext({
    projectRoot: fx.server.projectDir,
    options: parseOptions(OPTIONS),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the leader's session is on the project server here"),
  });
  return useRecordedProjectServer(ctx);
}

/** The session's assistant messages summed as the server reports them. */
async function serverSpend(sessionId: string): Promise<{ tokens: number; cost: number; turns: number }> {
  let tokens = 0;
  let cost = 0;
  let turns = 0;
  for (const { info } of await fx.server.messages(sessionId)) {
    const message = info as unknown as {
      role: string;
      cost: number;
      tokens: { input: number; output: number; reasoning: number; cache: { read: number; write: number } };
    };
    if (message.role !== "assistant") continue;
    const t = message.tokens;
    tokens += t.input + t.output + t.reasoning + t.cache.read + t.cache.write;
    cost += message.cost;
    turns++;
  }
  return { tokens, cost: Math.round(cost * 1e8) / 1e8, turns };
}

/** An agent as the listings show it: its usage is counted into its heartbeat slot. */
async function agent(ctx: TeamsContext, agentId: string): Promise<AgentState> {
  const read = await ctx.store.readAgentView(TEAM, agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agentId} unreadable: ${read.kind}`);
  return read.value.state;
}

/** A worker's script: `n` tool calls (one model call each, the model taking `ms` over each), then DONE. */
function steps(n: number, ms = 0): string {
  const call = `@@call list-tasks {"teamName":"${TEAM}"}`;
  return Array.from({ length: n }, () => (ms > 0 ? `@@sleep ${ms}\n${call}` : call)).join("\n");
}

/** Wait until the agent's counted usage equals what the server's messages say (writes are coalesced). */
async function countedAs(
  ctx: TeamsContext,
  agentId: string,
  expected: { tokens: number; cost: number; turns: number },
) {
  await waitFor(
    async () => {
      const totals = (await agent(ctx, agentId)).usage?.totals;
      return (
        totals?.turns === expected.turns &&
        totals.total === expected.tokens &&
        totals.costUsd === expected.cost
      );
    },
    { timeoutMs: 20_000, message: `${agentId}'s usage to reach ${JSON.stringify(expected)}` },
  );
}

async function leaderNotices(ctx: TeamsContext, leader: string): Promise<string[]> {
  return (await ctx.store.readInbox(TEAM, leader)).items.map((m) => m.text);
}

test("real server: usage matches the server to the token and the cent, across a restart of the leader's process; a budget stops an agent within one model call; the leader is told at 80% and 100%; a spawn past maxAgents is refused; resume with a new budget continues the session", async () => {
  const server = fx.server;
  const ctx = context();
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  const leaderSession = await server.createSession("leader");
  const team = await createTeam(ctx, { teamName: TEAM, maxAgents: 3 }, leaderSession);
  if (!team.success) throw new Error(team.error);
  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  await waitFor(() => (liveness?.monitor.stats.connects ?? 0) >= 1, { timeoutMs: 20_000 });

  // 1. Usage per agent matches the server's messages.
  const counted = await spawnAgent(
    ctx,
    { teamName: TEAM, prompt: steps(3), name: "counted", headless: true },
    leaderSession,
  );
  if (!counted.success) throw new Error(counted.error);
  await waitFor(async () => (await serverSpend(counted.sessionId)).turns === 4, { timeoutMs: 60_000 });
  await server.waitForIdle(counted.sessionId, { timeoutMs: 60_000 });
  const expected = await serverSpend(counted.sessionId);
  expect(expected.turns).toBe(4);
  // The price in opencode.json: 10 x $1000/M + 5 x $2000/M per call.
  expect(expected.cost).toBeCloseTo(0.08, 10);
  await countedAs(ctx, counted.agentId, expected);
  expect((await agent(ctx, counted.agentId)).usage?.totals).toMatchObject({
    total: expected.tokens,
    costUsd: expected.cost,
    turns: 4,
  });

  // 2. The leader's process stops; the agent works meanwhile; a new process counts it all, once.
  await liveness.release();
  liveness = undefined;
  await server.promptAndWait(counted.sessionId, steps(2), { timeoutMs: 60_000 });
  const afterGap = await serverSpend(counted.sessionId);
  expect(afterGap.turns).toBe(7);
  expect((await agent(ctx, counted.agentId)).usage?.totals.turns).toBe(4);
  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  await countedAs(ctx, counted.agentId, afterGap);
  await server.promptAndWait(counted.sessionId, steps(1), { timeoutMs: 60_000 });
  const final = await serverSpend(counted.sessionId);
  await countedAs(ctx, counted.agentId, final);
  expect((await agent(ctx, counted.agentId)).usage?.totals).toMatchObject({
    total: final.tokens,
    costUsd: final.cost,
    turns: 9,
  });

  // 3. A budget of $0.10 (five calls) on an agent scripted for twenty: warned at 80%, stopped at 100%.
  const capped = await spawnAgent(
    ctx,
    { teamName: TEAM, prompt: steps(20, 1_000), name: "capped", headless: true, budget: { usd: 0.1 } },
    leaderSession,
  );
  if (!capped.success) throw new Error(capped.error);
  await waitFor(async () => (await agent(ctx, capped.agentId)).status === "terminated", {
    timeoutMs: 60_000,
  });
  const stopped = await agent(ctx, capped.agentId);
  expect(stopped.outcome).toBe("budget");
  await server.waitForIdle(capped.sessionId, { timeoutMs: 30_000 });
  const spent = await serverSpend(capped.sessionId);
  // At most the model call in flight when the budget was reached: $0.02 over.
  expect(spent.cost).toBeGreaterThanOrEqual(0.1);
  expect(spent.cost).toBeLessThanOrEqual(0.12 + 1e-9);
  expect(spent.turns).toBeLessThan(21);
  console.log(
    `budget $0.10: stopped at $${spent.cost.toFixed(2)} after ${spent.turns} model calls (overshoot $${(spent.cost - 0.1).toFixed(2)})`,
  );
  const notices = await leaderNotices(ctx, team.leaderAgentId);
  expect(
    notices.filter((text) => text.includes("'capped'") && text.includes("80% of its budget")),
  ).toHaveLength(1);
  expect(notices.filter((text) => text.includes("'capped'") && text.includes("was stopped"))).toHaveLength(1);
  const wrapUp = (await ctx.store.readInbox(TEAM, capped.agentId)).items.map((m) => m.text);
  expect(wrapUp.some((text) => text.includes("Wrap up now"))).toBe(true);
  // Its usage as last counted matches the server's.
  await waitFor(async () => (await agent(ctx, capped.agentId)).usage?.totals.costUsd === spent.cost, {
    timeoutMs: 20_000,
  });

  // 4. Three agents run (maxAgents 3; the idle one counts): a fourth spawn is refused with their names.
  const holders = [];
  for (const name of ["hold-1", "hold-2"]) {
    const held = await spawnAgent(
      ctx,
      { teamName: TEAM, prompt: "@@wait release-holders", name, headless: true },
      leaderSession,
    );
    if (!held.success) throw new Error(held.error);
    holders.push(held);
  }
  const refused = await spawnAgent(ctx, { teamName: TEAM, prompt: "x", headless: true }, leaderSession);
  expect(refused.success).toBe(false);
  if (refused.success) throw new Error("spawned past maxAgents");
  expect(refused.error).toContain("counted, hold-1, hold-2");
  fx.mock.open("release-holders");
  for (const held of holders) await server.waitForIdle(held.sessionId, { timeoutMs: 60_000 });
  await ctx.store.updateTeam(TEAM, (t) => (t ? { ...t, maxAgents: 8 } : t));

  // 5. Resumed with a new budget: the same session goes on, and the new run counts only what it adds.
  const resumed = await resumeAgent(
    ctx,
    { teamName: TEAM, agentId: capped.agentId, budget: { usd: 0.5 }, prompt: steps(2) },
    leaderSession,
  );
  if (!resumed.success) throw new Error(resumed.error);
  expect(resumed.sessionReused).toBe(true);
  expect(resumed.sessionId).toBe(capped.sessionId);
  await waitFor(async () => (await serverSpend(capped.sessionId)).turns >= spent.turns + 3, {
    timeoutMs: 60_000,
  });
  await server.waitForIdle(capped.sessionId, { timeoutMs: 60_000 });
  const session = await serverSpend(capped.sessionId);
  await waitFor(
    async () => {
      const [old, next] = [await agent(ctx, capped.agentId), await agent(ctx, resumed.agentId)];
      const sum = (old.usage?.totals.costUsd ?? 0) + (next.usage?.totals.costUsd ?? 0);
      return Math.abs(sum - session.cost) < 1e-9;
    },
    { timeoutMs: 20_000 },
  );
  const next = await agent(ctx, resumed.agentId);
  expect(next.budget).toEqual({ usd: 0.5 });
  expect(next.usage?.totals.turns).toBe(3);
}, 300_000);

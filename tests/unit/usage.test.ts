import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { MessageUsage } from "../../src/edges/opencode-api.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { addAgent, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, type LedTeam, leaderInbox, ledTeamContext, taskInProgress } from "../helpers/team.ts";

let ctx: TestContext;
let lead: LedTeam;
let monitor: EventMonitor;

function usage(
  sessionId: string,
  messageId: string,
  input: number,
  output: number,
  cost: number,
): MessageUsage {
  return {
    sessionId,
    messageId,
    model: "mock/mock-model",
    input,
    output,
    reasoning: 0,
    cacheRead: 0,
    cacheWrite: 0,
    cost,
  };
}

/** A `message.updated` event of an assistant message, as OpenCode 1.18 sends it. */
function updated(m: MessageUsage) {
  return {
    type: "message.updated",
    properties: {
      info: {
        id: m.messageId,
        sessionID: m.sessionId,
        role: "assistant",
        providerID: "mock",
        modelID: "mock-model",
        cost: m.cost,
        tokens: { input: m.input, output: m.output, reasoning: 0, cache: { read: 0, write: 0 } },
      },
    },
  };
}

/** An agent's usage as the listings show it (counted into its heartbeat slot). */
async function counted(agent: { agentId: string }) {
  const read = await ctx.store.readAgentView("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agent.agentId} unreadable`);
  return read.value.state.usage;
}

async function feed(...events: unknown[]): Promise<void> {
  for (const event of events) monitor.handleEvent(event);
  await monitor.settled();
}

/**
 * A fresh team whose usage writes coalesce over 5 s, with one agent on the server; `part(n)` is a sign of life of the
 * agent's session (the monitor's heartbeat write, which may carry the count).
 */
async function coalescingAgent() {
  await ctx.cleanup();
  ({ ctx, ...lead } = await ledTeamContext({ eventCoalesceMs: 5_000 }));
  monitor = new EventMonitor(ctx, { indexRebuildMs: 0 });
  const agent = await addAgent(ctx, "alpha");
  ctx.server.addSession({ id: agent.sessionId });
  const part = (n: number) => ({
    type: "message.part.updated",
    properties: { part: { id: `prt_${n}`, sessionID: agent.sessionId, type: "text", text: "…" } },
  });
  return { agent, part };
}

/** A few turns of the event loop and the monitor's queue: trailing writes that woke are done after it. */
async function drain(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Bun.sleep(5);
    await monitor.settled();
  }
}

beforeEach(async () => {
  // Every change written at once; the coalescing of usage writes has its own test.
  ({ ctx, ...lead } = await ledTeamContext({ eventCoalesceMs: 0 }));
  monitor = new EventMonitor(ctx, { indexRebuildMs: 0 });
});
afterEach(() => ctx.cleanup());

describe("usage counting", () => {
  test("a message updated ten times counts once, at its last value; messages and models sum", async () => {
    const agent = await addAgent(ctx, "alpha");
    ctx.server.addSession({ id: agent.sessionId });
    for (let i = 1; i <= 10; i++)
      monitor.handleEvent(updated(usage(agent.sessionId, "msg_a", 10 * i, i, 0.001 * i)));
    await feed(updated(usage(agent.sessionId, "msg_b", 7, 3, 0.005)));
    const spent = await counted(agent);
    expect(spent?.totals).toEqual({
      input: 107,
      output: 13,
      reasoning: 0,
      cacheRead: 0,
      cacheWrite: 0,
      total: 120,
      costUsd: 0.015,
      turns: 2,
    });
    expect(Object.keys(spent?.byModel ?? {})).toEqual(["mock/mock-model"]);
  });

  test("a session seen created is counted from its events alone: its messages are not asked of the server", async () => {
    const born = await addAgent(ctx, "alpha");
    const older = await addAgent(ctx, "alpha");
    for (const agent of [born, older]) ctx.server.addSession({ id: agent.sessionId });
    const created = { type: "session.created", properties: { info: { id: born.sessionId, title: "x" } } };
    // A request for its messages would reach the server in the middle of the new session's first turn.
    await feed(created, updated(usage(born.sessionId, "m1", 10, 5, 0.02)));
    await feed(updated(usage(older.sessionId, "m1", 10, 5, 0.02)));
    expect(ctx.server.calls.filter((call) => call.startsWith("messageUsage"))).toEqual([
      `messageUsage ${older.sessionId}`,
    ]);
    expect((await counted(born))?.totals).toMatchObject({ total: 15, turns: 1 });
    // After a gap in the stream, what this process saw is no longer the whole: the server is asked again.
    await monitor.resync(ctx.server);
    expect(ctx.server.calls).toContain(`messageUsage ${born.sessionId}`);
  });

  test("a busy stream writes an agent's usage at most once per eventCoalesceMs; the last change follows", async () => {
    const { agent } = await coalescingAgent();
    for (let i = 1; i <= 20; i++) {
      ctx.clock.advance(100);
      monitor.handleEvent(updated(usage(agent.sessionId, `msg_${Math.ceil(i / 4)}`, i, 1, 0.001)));
    }
    await monitor.settled();
    expect(monitor.usage.stats.writes).toBe(1);
    expect((await counted(agent))?.totals.turns).toBe(1);
    ctx.clock.advance(5_000);
    // The trailing write waits on the clock in the background, then runs in the monitor's queue.
    for (let i = 0; i < 50 && monitor.usage.stats.writes < 2; i++) {
      await Bun.sleep(5);
      await monitor.settled();
    }
    expect(monitor.usage.stats.writes).toBe(2);
    expect((await counted(agent))?.totals).toMatchObject({
      input: 4 + 8 + 12 + 16 + 20,
      turns: 5,
    });
  });

  test("the monitor's heartbeat write of an agent without a budget carries its latest usage: no write of its own", async () => {
    const { agent, part } = await coalescingAgent();
    await feed(updated(usage(agent.sessionId, "m1", 10, 5, 0.02)));
    ctx.clock.advance(1_000);
    await feed(updated(usage(agent.sessionId, "m2", 10, 5, 0.02)));
    ctx.clock.advance(5_000);
    await feed(part(1));
    expect({ writes: monitor.usage.stats.writes, carried: monitor.usage.stats.carried }).toEqual({
      writes: 1,
      carried: 1,
    });
    expect((await counted(agent))?.totals).toMatchObject({ total: 30, turns: 2 });
    // The trailing write of m2 finds it written and writes nothing.
    await drain();
    expect(monitor.usage.stats.writes).toBe(1);
  });

  test("a change after a carried heartbeat waits for the end of that heartbeat's window, then is written", async () => {
    const { agent, part } = await coalescingAgent();
    await feed(updated(usage(agent.sessionId, "m1", 10, 5, 0.02)));
    ctx.clock.advance(1_000);
    // Inside the first window: its trailing write is due at 5 s.
    await feed(updated(usage(agent.sessionId, "m2", 10, 5, 0.02)));
    ctx.clock.advance(4_500);
    // A heartbeat at 5.5 s carries m2 and opens a new window; m3 comes inside it.
    await feed(part(1), updated(usage(agent.sessionId, "m3", 10, 5, 0.02)));
    await drain();
    expect({ writes: monitor.usage.stats.writes, carried: monitor.usage.stats.carried }).toEqual({
      writes: 1,
      carried: 1,
    });
    expect((await counted(agent))?.totals).toMatchObject({ total: 30, turns: 2 });
    ctx.clock.advance(4_000);
    await drain();
    // 9.5 s: the trailing write woke at 5 s in the new window and waits for its end (10.5 s).
    expect(monitor.usage.stats.writes).toBe(1);
    ctx.clock.advance(1_000);
    await drain();
    expect(monitor.usage.stats.writes).toBe(2);
    expect((await counted(agent))?.totals).toMatchObject({ total: 45, turns: 3 });
  });

  test("a session the plugin does not know is ignored: no write, no usage read from the server", async () => {
    ctx.server.calls.length = 0;
    await feed(updated(usage("ses_stranger", "msg_x", 1000, 1000, 5)));
    // The monitor asks once whose subagent the session is (specs/heartbeat.md); nothing of its usage is read.
    expect(ctx.server.calls).toEqual(["sessionParent ses_stranger"]);
    expect(monitor.usage.stats.writes).toBe(0);
  });

  test("a process that starts late counts the session from the server: nothing lost, nothing doubled", async () => {
    const agent = await addAgent(ctx, "alpha");
    // Three messages happened before this process listened; the third is then updated by the stream.
    const earlier = [usage(agent.sessionId, "m1", 10, 5, 0.02), usage(agent.sessionId, "m2", 10, 5, 0.02)];
    ctx.server.addSession({
      id: agent.sessionId,
      usage: [...earlier, usage(agent.sessionId, "m3", 10, 0, 0.01)],
    });
    await feed(
      updated(usage(agent.sessionId, "m3", 10, 5, 0.02)),
      updated(usage(agent.sessionId, "m3", 10, 5, 0.02)),
    );
    expect((await counted(agent))?.totals).toMatchObject({
      total: 45,
      costUsd: 0.06,
      turns: 3,
    });
    // A second process (the leader's restart) counts the same again from scratch: the same totals, not twice them.
    const restarted = new EventMonitor(ctx, { indexRebuildMs: 0 });
    ctx.server.sessions.get(agent.sessionId)?.usage.splice(2, 1, usage(agent.sessionId, "m3", 10, 5, 0.02));
    restarted.handleEvent(updated(usage(agent.sessionId, "m2", 10, 5, 0.02)));
    await restarted.settled();
    expect((await counted(agent))?.totals).toMatchObject({
      total: 45,
      costUsd: 0.06,
      turns: 3,
    });
  });

  test("after a gap in the stream the live agents are counted again from the server", async () => {
    const agent = await addAgent(ctx, "alpha");
    const session = ctx.server.addSession({ id: agent.sessionId, usage: [] });
    await feed(updated(usage(agent.sessionId, "m1", 10, 5, 0.02)));
    // Messages the stream lost while it was down.
    session.usage.push(usage(agent.sessionId, "m1", 10, 5, 0.02), usage(agent.sessionId, "m2", 100, 50, 0.2));
    await monitor.resync(ctx.server);
    expect((await counted(agent))?.totals).toMatchObject({
      total: 165,
      costUsd: 0.22,
      turns: 2,
    });
  });

  test("a resumed run counts only what its session spends after the resume", async () => {
    const base = {
      totals: {
        input: 10,
        output: 5,
        reasoning: 0,
        cacheRead: 0,
        cacheWrite: 0,
        total: 15,
        costUsd: 0.02,
        turns: 1,
      },
      byModel: {},
      countedAt: new Date(ctx.clock.now()).toISOString(),
    };
    const agent = await addAgent(ctx, "alpha", { usageBase: base });
    ctx.server.addSession({ id: agent.sessionId, usage: [usage(agent.sessionId, "m1", 10, 5, 0.02)] });
    await feed(updated(usage(agent.sessionId, "m2", 20, 10, 0.04)));
    expect((await counted(agent))?.totals).toMatchObject({
      total: 30,
      costUsd: 0.04,
      turns: 1,
    });
  });
});

describe("budgets", () => {
  test("at 80% the leader is told once and the agent asked to wrap up; at 100% it ends with reason budget", async () => {
    const spawned = await spawnHeadless(lead.call, "ses_lead");
    await ctx.store.updateAgent("alpha", spawned.agentId, (s) => (s ? { ...s, budget: { usd: 0.1 } } : s));
    const taskId = await taskInProgress(lead.call, "ses_lead", "parse", { assignee: spawned.agentId });
    const sid = spawned.sessionId;
    await feed(updated(usage(sid, "m1", 10, 5, 0.05)));
    expect((await leaderInbox(ctx)).filter((m) => m.text.includes("budget"))).toHaveLength(0);
    await feed(updated(usage(sid, "m2", 10, 5, 0.035)), updated(usage(sid, "m2", 10, 5, 0.035)));
    const warned = (await leaderInbox(ctx)).filter((m) => m.text.includes("of its budget"));
    expect(warned).toHaveLength(1);
    expect(warned[0]?.text).toContain("85%");
    const agentInbox = (await ctx.store.readInbox("alpha", spawned.agentId)).items;
    expect(agentInbox.map((m) => m.text).join()).toContain("Wrap up now");
    await feed(updated(usage(sid, "m3", 10, 5, 0.02)));
    const ended = await agentOnDisk(ctx, spawned);
    expect(ended).toMatchObject({ status: "terminated", outcome: "budget" });
    expect(ended.statusReason).toContain("budget");
    expect(ctx.server.calls).toContain(`abortSession ${sid}`);
    const stopped = (await leaderInbox(ctx)).filter((m) => m.text.includes("was stopped"));
    expect(stopped).toHaveLength(1);
    expect(stopped[0]?.text).toContain("$0.1050");
    expect(stopped[0]?.text).toContain(taskId);
    const tasks = await lead.call<{ tasks: { id: string; status: string }[] }>(
      "list-tasks",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(tasks.tasks.find((t) => t.id === taskId)?.status).toBe("pending");
    const history = await lead.call<{ entries: { agent_id: string; status: string; usage?: unknown }[] }>(
      "agent-history",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(history.entries.find((e) => e.agent_id === spawned.agentId)).toMatchObject({
      status: "budget",
      usage: { costUsd: 0.105, total: 45 },
    });
  });

  test("a usd budget on a model with no price is reported to the leader once", async () => {
    const spawned = await spawnHeadless(lead.call, "ses_lead");
    await ctx.store.updateAgent("alpha", spawned.agentId, (s) => (s ? { ...s, budget: { usd: 1 } } : s));
    await feed(
      updated(usage(spawned.sessionId, "m1", 10, 5, 0)),
      updated(usage(spawned.sessionId, "m2", 10, 5, 0)),
    );
    const told = (await leaderInbox(ctx)).filter((m) => m.text.includes("reports no price"));
    expect(told).toHaveLength(1);
  });

  test("bad budgets and caps are refused at the boundary and nothing is written", async () => {
    for (const budget of [{ usd: -1 }, { usd: 0 }, { tokens: 1.5 }, { usd: 1e9 }, {}, { tokens: 0 }]) {
      const result = await lead.call<{ success: boolean; error?: string }>(
        "spawn-agent",
        { teamName: "alpha", prompt: "x", headless: true, budget },
        "ses_lead",
      );
      expect(result.success).toBe(false);
      expect(result.error).toMatch(/budget/);
    }
    for (const maxAgents of [0, -3, 2.5, 100000]) {
      const result = await lead.call<{ success: boolean; error?: string }>(
        "create-team",
        { teamName: "beta", maxAgents },
        "ses_b",
      );
      expect(result).toMatchObject({ success: false, error: expect.stringContaining("maxAgents") });
    }
    expect((await ctx.store.listAgentViews("alpha")).items).toHaveLength(1);
    expect(await ctx.store.listTeamNames()).toEqual(["alpha"]);
  });

  test("a spawn the team's spent budget cannot cover is refused with the numbers", async () => {
    await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, budget: { tokens: 40 } } : t));
    const spawned = await spawnHeadless(lead.call, "ses_lead");
    await feed(updated(usage(spawned.sessionId, "m1", 30, 15, 0.01)));
    expect((await agentOnDisk(ctx, spawned)).outcome).toBe("budget");
    const refused = await lead.call<{ success: boolean; error?: string }>(
      "spawn-agent",
      { teamName: "alpha", prompt: "more", headless: true },
      "ses_lead",
    );
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("45 tokens");
    expect(refused.error).toContain("40 tokens");
  });

  test("resume of an agent its budget stopped needs a new budget, and counts from the resume on", async () => {
    const spawned = await spawnHeadless(lead.call, "ses_lead");
    await ctx.store.updateAgent("alpha", spawned.agentId, (s) => (s ? { ...s, budget: { tokens: 20 } } : s));
    await feed(updated(usage(spawned.sessionId, "m1", 20, 5, 0)));
    expect((await agentOnDisk(ctx, spawned)).outcome).toBe("budget");
    const bare = await lead.call<{ success: boolean; error?: string }>(
      "resume-agent",
      { teamName: "alpha", agentId: spawned.agentId },
      "ses_lead",
    );
    expect(bare).toMatchObject({ success: false, error: expect.stringContaining("new budget") });
    const resumed = await lead.call<{
      success: boolean;
      agentId: string;
      sessionId: string;
      sessionReused: boolean;
    }>("resume-agent", { teamName: "alpha", agentId: spawned.agentId, budget: { tokens: 100 } }, "ses_lead");
    expect(resumed).toMatchObject({ success: true, sessionId: spawned.sessionId, sessionReused: true });
    ctx.server.sessions.get(spawned.sessionId)?.usage.push(usage(spawned.sessionId, "m1", 20, 5, 0));
    await feed(updated(usage(spawned.sessionId, "m2", 8, 2, 0)));
    const next = await agentOnDisk(ctx, { agentId: resumed.agentId });
    expect(next).toMatchObject({ status: "active", budget: { tokens: 100 } });
    expect((await counted(next))?.totals).toMatchObject({ total: 10, turns: 1 });
  });
});

describe("maxAgents", () => {
  test("a spawn beyond the team's cap is refused with the running agents' names and the way out", async () => {
    await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, maxAgents: 2 } : t));
    await spawnHeadless(lead.call, "ses_lead");
    await spawnHeadless(lead.call, "ses_lead");
    const refused = await lead.call<{ success: boolean; error?: string }>(
      "spawn-agent",
      { teamName: "alpha", prompt: "third", headless: true },
      "ses_lead",
    );
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("worker-1, worker-2");
    expect(refused.error).toContain("kill-agent");
    expect((await ctx.store.listAgentViews("alpha")).items).toHaveLength(3);
  });

  test("a team with as many members as its limit, none running, still spawns: the agent files are read to count", async () => {
    await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, maxAgents: 1 } : t));
    const first = await spawnHeadless(lead.call, "ses_lead");
    const killed = await lead.call<{ success: boolean }>(
      "kill-agent",
      { teamName: "alpha", agentId: first.agentId },
      "ses_lead",
    );
    expect(killed.success).toBe(true);
    await spawnHeadless(lead.call, "ses_lead");
    const refused = await lead.call<{ success: boolean; error?: string }>(
      "spawn-agent",
      { teamName: "alpha", prompt: "third", headless: true },
      "ses_lead",
    );
    expect(refused.error).toMatch(
      /^Team 'alpha' already runs 1 agent, the limit \(1, the team's maxAgents\): worker-2\./,
    );
  });

  test("below its limit of members, a spawn reads no agent file on its way to the prompt", async () => {
    await spawnHeadless(lead.call, "ses_lead");
    let listings = 0;
    let listingsAtPrompt: number | undefined;
    const list = ctx.store.listAgentViews.bind(ctx.store);
    ctx.store.listAgentViews = (...args) => {
      listings++;
      return list(...args);
    };
    const prompt = ctx.server.promptAsync.bind(ctx.server);
    ctx.server.promptAsync = (...args) => {
      listingsAtPrompt ??= listings;
      return prompt(...args);
    };
    await spawnHeadless(lead.call, "ses_lead");
    expect(listingsAtPrompt).toBe(0);
  });

  test("parallel spawns cannot both take the last place", async () => {
    await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, maxAgents: 1 } : t));
    const results = await Promise.all(
      [1, 2, 3].map((n) =>
        lead.call<{ success: boolean }>(
          "spawn-agent",
          { teamName: "alpha", prompt: `p${n}`, headless: true },
          "ses_lead",
        ),
      ),
    );
    expect(results.filter((r) => r.success)).toHaveLength(1);
  });
});

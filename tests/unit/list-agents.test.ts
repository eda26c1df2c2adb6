import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import type { AgentListing } from "../../src/operations/views/list-agents.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

type Listed = {
  success: boolean;
  error?: string;
  summary: {
    total: number;
    by_status: Record<string, number>;
    by_health: Record<string, number>;
    loaded_count: number;
  };
  agents?: AgentListing[] | Record<string, AgentListing[]>;
  warnings?: string[];
};

function keyShape(value: unknown, prefix = ""): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([key, inner]) =>
    // metrics may be null: its own key is the shape; nested keys are compared where present.
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? keyShape(inner, `${prefix}${key}.`)
      : [`${prefix}${key}`],
  );
}

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

const USAGE = {
  totals: {
    input: 100,
    output: 50,
    reasoning: 5,
    cacheRead: 20,
    cacheWrite: 0,
    total: 175,
    costUsd: 0.01,
    turns: 4,
  },
  byModel: {},
  countedAt: "2026-01-01T00:00:00.000Z",
};

async function fourAgents() {
  const healthy = await addAgent(ctx, "alpha", {
    name: "healthy",
    tags: ["api", "db", "auth", "extra"],
    usage: USAGE,
  });
  const dead = await addAgent(ctx, "alpha", {
    name: "dead",
    status: "inactive",
    consecutiveMisses: 2,
    usage: USAGE,
  });
  const gone = await addAgent(ctx, "alpha", { name: "gone", status: "terminated", paneId: "%3" });
  // No assistant message counted yet: its usage is unknown.
  const damaged = await addAgent(ctx, "alpha", { name: "damaged-metrics" });
  return { healthy, dead, gone, damaged };
}

describe("list-agents", () => {
  test("every agent has the same keys whatever its state, null where unknown", async () => {
    await fourAgents();
    const result = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
    const agents = result.agents as AgentListing[];
    const byName = Object.fromEntries(agents.map((a) => [a.name, a]));
    const reference = Object.keys(byName.healthy as AgentListing).sort();
    for (const agent of agents) {
      expect(Object.keys(agent).sort()).toEqual(reference);
      expect(Object.keys(agent.summary).sort()).toEqual([
        "age_days",
        "last_activity",
        "primary_tags",
        "updates",
      ]);
      expect(Object.keys(agent.metadata).sort()).toEqual(
        [
          "color",
          "created",
          "last_update",
          "model",
          "notes_preview",
          "pane_id",
          "plan",
          "session_id",
          "tags",
          "worktree",
        ].sort(),
      );
      expect(Object.keys(agent.state).sort()).toEqual(["error", "loaded_in_process", "metrics_available"]);
    }
    const withMetrics = keyShape(byName.healthy);
    expect(keyShape(byName.dead)).toEqual(withMetrics);
    expect(byName.healthy?.metrics).toMatchObject({
      tokens_input: 100,
      tokens_output: 50,
      tokens_reasoning: 5,
      tokens_cache_read: 20,
      tokens_cache_write: 0,
      tokens_total: 175,
      cost_usd: 0.01,
      turns: 4,
    });
    expect(byName.healthy?.summary.primary_tags).toEqual(["api", "db", "auth"]);
    expect(byName.healthy?.health_status).toBe("healthy");
    expect(byName.dead?.health_status).toBe("critical");
    expect(byName.gone?.health_status).toBe("unknown");
    expect(byName.gone?.metadata.pane_id).toBe("%3");
    expect(keyShape(byName["damaged-metrics"])).toEqual(withMetrics);
    expect(byName["damaged-metrics"]?.metrics).toMatchObject({
      tokens_total: null,
      cost_usd: null,
      turns: null,
    });
    expect(byName["damaged-metrics"]?.metadata.pane_id).toBeNull();
    expect(byName["damaged-metrics"]?.state).toEqual({
      loaded_in_process: false,
      metrics_available: false,
      error: null,
    });
  });

  test("grouped by status with summaries by status and health", async () => {
    await fourAgents();
    const result = await call<Listed>("list-agents", { teamName: "alpha" }, "ses_lead");
    const groups = result.agents as Record<string, AgentListing[]>;
    expect(Object.keys(groups).sort()).toEqual(["active", "inactive", "terminated"]);
    expect(groups.active?.map((a) => a.name).sort()).toEqual(["damaged-metrics", "healthy", "leader"]);
    expect(result.summary.total).toBe(5);
    expect(result.summary.by_status).toEqual({ active: 3, inactive: 1, terminated: 1 });
    expect(result.summary.by_health.critical).toBe(1);
    expect(result.summary.loaded_count).toBe(2);
  });

  test("filters and summaryOnly", async () => {
    await fourAgents();
    const critical = await call<Listed>(
      "list-agents",
      { teamName: "alpha", healthFilter: "critical", grouped: false },
      "ses_lead",
    );
    expect((critical.agents as AgentListing[]).map((a) => a.name)).toEqual(["dead"]);
    const terminated = await call<Listed>(
      "list-agents",
      { statusFilter: "terminated", grouped: false },
      "ses_lead",
    );
    expect((terminated.agents as AgentListing[]).map((a) => a.name)).toEqual(["gone"]);
    const summary = await call<Listed>("list-agents", { teamName: "alpha", summaryOnly: true }, "ses_lead");
    expect(summary.agents).toBeUndefined();
    expect(summary.summary.total).toBe(5);
  });

  test("health follows heartbeat age, misses and errors", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "aging" });
    const health = async () => {
      const r = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
      return (r.agents as AgentListing[]).find((a) => a.name === "aging")?.health_status;
    };
    expect(await health()).toBe("healthy");
    ctx.clock.advance(35_000);
    expect(await health()).toBe("degraded");
    ctx.clock.advance(30_000);
    expect(await health()).toBe("critical");
    const errorAt = new Date(ctx.clock.now()).toISOString();
    await ctx.store.updateAgent("alpha", agent.agentId, (a) =>
      a
        ? {
            ...a,
            lastError: "ContextOverflowError: too long",
            lastErrorAt: errorAt,
            heartbeatTs: errorAt,
            failing: { kind: "context_overflow", error: "too long", since: errorAt, notified: [] },
          }
        : undefined,
    );
    expect(await health()).toBe("error");
  });

  test("usage comes from the agents' files: no server is asked, and a stopped server changes nothing", async () => {
    await fourAgents();
    ctx.server.calls.length = 0;
    const up = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
    expect(ctx.server.calls).toEqual([]);
    ctx.projectServerUp = false;
    const down = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
    const worker = (down.agents as AgentListing[]).find((a) => a.name === "healthy");
    expect(worker?.metrics).toMatchObject({ tokens_total: 175, cost_usd: 0.01 });
    expect(worker?.state.error).toBeNull();
    expect(down.summary).toEqual(up.summary);
    expect(down.summary.loaded_count).toBe(2);
  });

  test("the summary gives each team's usage: agents summed (every run), the leader apart, the budget used", async () => {
    await fourAgents();
    await ctx.store.updateTeam("alpha", (team) => (team ? { ...team, budget: { usd: 0.04 } } : undefined));
    const leader = (await ctx.store.listAgentViews("alpha")).items.find((v) => v.state.role === "leader");
    if (!leader) throw new Error("no leader");
    await ctx.store.writeAgent({ ...leader.state, usage: USAGE });
    const result = await call<Listed & { summary: { usage: Record<string, unknown> } }>(
      "list-agents",
      { teamName: "alpha", summaryOnly: true },
      "ses_lead",
    );
    expect(result.summary.usage.alpha).toEqual({
      agents: {
        tokens_input: 200,
        tokens_output: 100,
        tokens_reasoning: 10,
        tokens_cache_read: 40,
        tokens_cache_write: 0,
        tokens_total: 350,
        cost_usd: 0.02,
        turns: 8,
      },
      leader: expect.objectContaining({ tokens_total: 175, cost_usd: 0.01 }),
      budget: { usd: 0.04 },
      budget_used: 0.5,
    });
  });

  test("only teams the caller belongs to; strangers are refused", async () => {
    await call("create-team", { teamName: "beta" }, "ses_other");
    const mine = await call<Listed>("list-agents", { grouped: false }, "ses_lead");
    expect((mine.agents as AgentListing[]).every((a) => a.team === "alpha")).toBe(true);
    const refused = await call<Listed>("list-agents", { teamName: "beta" }, "ses_lead");
    expect(refused).toMatchObject({ success: false });
    expect(await call<Listed>("list-agents", { teamName: "nope" }, "ses_lead")).toMatchObject({
      success: false,
      error: "Team 'nope' does not exist",
    });
  });

  test("a damaged agent file: its agent is listed as inactive, health error, with a warning", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "broken" });
    await writeFile(ctx.store.paths.agentState("alpha", agent.agentId), "{");
    const result = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
    expect(result.success).toBe(true);
    const listed = (result.agents as AgentListing[]).map((a) => [
      a.agent_id,
      a.lifecycle_status,
      a.health_status,
    ]);
    expect(listed).toContainEqual([agent.agentId, "inactive", "error"]);
    expect(result.warnings?.[0]).toContain(agent.agentId);
  });
});

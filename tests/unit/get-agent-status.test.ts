import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import { v4 as uuidv4 } from "uuid";
import type { ServerReport } from "../../src/edges/server-report.ts";
import type { AgentStatusResponse, StatusSummary } from "../../src/operations/views/status.ts";
import type { ServerInfo } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

type Status = {
  success: boolean;
  error?: string;
  agents: AgentStatusResponse[];
  server?: Record<string, unknown>;
  summary: StatusSummary;
  warnings?: string[];
};

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

function status(args: Record<string, unknown>, sessionId = "ses_lead") {
  return call<Status>("get-agent-status", { teamName: "alpha", ...args }, sessionId);
}

const SEED_KEYS = [
  "agentId",
  "name",
  "role",
  "model",
  "status",
  "isActive",
  "color",
  "heartbeatTs",
  "heartbeatAge",
  "heartbeatHealthy",
  "sessionId",
  "paneId",
  "cwd",
  "consecutiveMisses",
  "lastError",
  "failing",
  "waitingFor",
  "sessionRotationCount",
  "createdAt",
  "terminatedAt",
  "usage",
];

describe("get-agent-status", () => {
  test("each agent carries the spec's fields and nothing else", async () => {
    await addAgent(ctx, "alpha", {
      paneId: "%4",
      lastError: "APIError: rate limited",
      terminatedAt: "2026-01-01T00:00:00.000Z",
    });
    const result = await status({ includeTerminated: true });
    expect(result.success).toBe(true);
    for (const agent of result.agents) {
      for (const key of Object.keys(agent)) expect(SEED_KEYS).toContain(key);
    }
    const worker = result.agents.find((a) => a.name === "worker-1");
    expect(Object.keys(worker ?? {}).sort()).toEqual([...SEED_KEYS].sort());
    // Usage is read from the agent's state: no server call, the same keys as list-agents' metrics.
    expect(worker?.usage).toEqual({
      tokens_input: null,
      tokens_output: null,
      tokens_reasoning: null,
      tokens_cache_read: null,
      tokens_cache_write: null,
      tokens_total: null,
      cost_usd: null,
      turns: null,
      budget: null,
      budget_used: null,
      counted_at: null,
    });
    expect(Object.keys(result).sort()).toEqual(["agents", "success", "summary", "title"]);
  });

  test("heartbeat age and health come from the freshest heartbeat and the clock", async () => {
    const agent = await addAgent(ctx, "alpha");
    ctx.clock.advance(20_000);
    await call("heartbeat", { agentId: agent.agentId, teamName: "alpha" }, agent.sessionId);
    ctx.clock.advance(30_500);
    let [view] = (await status({ agentId: agent.agentId })).agents;
    expect(view).toMatchObject({
      heartbeatTs: "2026-01-01T00:00:20.000Z",
      heartbeatAge: 30.5,
      heartbeatHealthy: true,
      isActive: true,
    });
    ctx.clock.advance(29_500);
    [view] = (await status({ agentId: agent.agentId })).agents;
    expect(view).toMatchObject({ heartbeatAge: 60, heartbeatHealthy: false });
  });

  test("summary counts as the spec's table; terminated hidden unless asked for", async () => {
    await addAgent(ctx, "alpha", { name: "a1", status: "active" });
    await addAgent(ctx, "alpha", { name: "i1", status: "idle" });
    await addAgent(ctx, "alpha", { name: "x1", status: "inactive" });
    await addAgent(ctx, "alpha", { name: "s1", status: "shutting_down" });
    await addAgent(ctx, "alpha", { name: "t1", status: "terminated" });
    await addAgent(ctx, "alpha", { name: "p1", status: "spawning" });
    const hidden = await status({});
    // 6 listed: the leader (active) plus five; the terminated one is not.
    expect(hidden.agents.map((a) => a.name).sort()).toEqual(["a1", "i1", "leader", "p1", "s1", "x1"]);
    expect(hidden.summary).toEqual({
      total: 6,
      active: 2,
      idle: 1,
      waiting: 0,
      inactive: 1,
      shuttingDown: 1,
      terminated: 0,
      usage: expect.objectContaining({ budget: null, leader: null }),
    });
    const all = await status({ includeTerminated: true });
    expect(all.summary).toEqual({
      total: 7,
      active: 2,
      idle: 1,
      waiting: 0,
      inactive: 1,
      shuttingDown: 1,
      terminated: 1,
      usage: expect.objectContaining({ budget: null, leader: null }),
    });
    const isActive = Object.fromEntries(all.agents.map((a) => [a.name, a.isActive]));
    expect(isActive).toEqual({
      leader: true,
      a1: true,
      i1: true,
      p1: true,
      x1: false,
      s1: false,
      t1: false,
    });
  });

  test("a single agent is returned even when terminated", async () => {
    const gone = await addAgent(ctx, "alpha", { status: "terminated" });
    const result = await status({ agentId: gone.agentId });
    expect(result.agents.map((a) => a.agentId)).toEqual([gone.agentId]);
    expect(result.summary.terminated).toBe(1);
  });

  test("any member may ask; a worker sees the whole team", async () => {
    const worker = await addAgent(ctx, "alpha");
    const result = await status({}, worker.sessionId);
    expect(result.success).toBe(true);
    expect(result.agents).toHaveLength(2);
  });

  test("a non-member is refused", async () => {
    const result = await status({}, "ses_stranger");
    expect(result).toMatchObject({
      success: false,
      error:
        "This session is not a member of team 'alpha'. Only the team's leader and its agents may do this.",
    });
  });

  test("error rows: team not found, agent not found", async () => {
    expect(await call<Status>("get-agent-status", { teamName: "nope" }, "ses_lead")).toMatchObject({
      success: false,
      error: "Team 'nope' does not exist",
    });
    const missing = uuidv4();
    expect(await status({ agentId: missing })).toMatchObject({
      success: false,
      error: `Agent '${missing}' not found in team 'alpha': call list-agents for its agents and their ids.`,
    });
  });

  test("a damaged agent file: shown as inactive with its error and a warning; the call succeeds", async () => {
    const good = await addAgent(ctx, "alpha", { name: "good" });
    const bad = await addAgent(ctx, "alpha", { name: "bad" });
    await writeFile(ctx.store.paths.agentState("alpha", bad.agentId), '{"version":1,"agentId":');
    const result = await status({});
    expect(result.success).toBe(true);
    expect(result.agents.map((a) => a.agentId)).toContain(good.agentId);
    expect(result.agents.find((a) => a.agentId === bad.agentId)).toMatchObject({
      status: "inactive",
      lastError: expect.stringContaining("kill-agent"),
    });
    expect(result.summary).toMatchObject({ total: 3, inactive: 1 });
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings?.[0]).toContain(bad.agentId);
  });

  test("a damaged file asked for by id: success, the agent as inactive, a warning", async () => {
    const bad = await addAgent(ctx, "alpha", { name: "bad" });
    await writeFile(ctx.store.paths.agentState("alpha", bad.agentId), "not json");
    const result = await status({ agentId: bad.agentId });
    expect(result.success).toBe(true);
    expect(result.agents.map((a) => [a.agentId, a.status])).toEqual([[bad.agentId, "inactive"]]);
    expect(result.warnings?.[0]).toContain(bad.agentId);
  });

  test("it is read-only", async () => {
    const agent = await addAgent(ctx, "alpha");
    const file = ctx.store.paths.agentState("alpha", agent.agentId);
    const before = await Bun.file(file).text();
    ctx.clock.advance(600_000);
    await status({ includeServer: true });
    expect(await Bun.file(file).text()).toBe(before);
    expect((await ctx.store.readHeartbeat("alpha", agent.agentId)).record).toBeUndefined();
  });
});

describe("get-agent-status: includeServer", () => {
  const info: ServerInfo = {
    version: 1,
    projectPath: "/p",
    pid: 4242,
    port: 28123,
    hostname: "127.0.0.1",
    startedAt: "2026-01-01T00:00:00.000Z",
    activeSessions: 2,
    logPath: "/tmp/x.log",
  };
  let reports = 0;
  beforeEach(() => {
    reports = 0;
  });

  /** The server as ServerManager.report() would see it (tests/unit/server-manager.test.ts covers that side). */
  function serverIs(report: ServerReport): void {
    ctx.edges.serverControl = {
      report: async () => {
        reports++;
        return report;
      },
      stop: async () => ({ stopped: false, detail: "not in this test" }),
      startedByThisProcess: async () => false,
      forgetHealthy: () => {},
    };
  }

  test("no ServerInfo: server is left out even when asked for", async () => {
    serverIs({ state: "none", detail: "no server" });
    const result = await status({ includeServer: true });
    expect(result.success).toBe(true);
    expect(result.server).toBeUndefined();
  });

  test("running: verified ours and healthy; activeSessions as recorded", async () => {
    serverIs({ state: "running", info, detail: "healthy" });
    const result = await status({ includeServer: true });
    expect(result.server).toEqual({
      port: 28123,
      pid: 4242,
      isRunning: true,
      state: "running",
      activeSessions: 2,
      hostname: "127.0.0.1",
      startedAt: "2026-01-01T00:00:00.000Z",
    });
    expect(result.warnings).toBeUndefined();
  });

  test("stopped: not running, no sessions", async () => {
    serverIs({ state: "stopped", info, detail: "gone" });
    const result = await status({ includeServer: true });
    expect(result.server).toMatchObject({ isRunning: false, state: "stopped", activeSessions: 0 });
  });

  test("alive but not answering: unresponsive with a warning, its sessions still counted", async () => {
    serverIs({
      state: "unresponsive",
      info,
      detail: "pid 4242 is alive but its health check does not answer",
    });
    const result = await status({ includeServer: true });
    expect(result.server).toMatchObject({ isRunning: false, state: "unresponsive", activeSessions: 2 });
    expect(result.warnings).toEqual([
      "The project server is unresponsive: pid 4242 is alive but its health check does not answer.",
    ]);
  });

  test("without includeServer the server is not looked at", async () => {
    serverIs({ state: "running", info, detail: "healthy" });
    const result = await status({});
    expect(result.server).toBeUndefined();
    expect(reports).toBe(0);
  });
});

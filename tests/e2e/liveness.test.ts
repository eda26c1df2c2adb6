/**
 * Liveness against a real `opencode serve` and the scripted mock model.
 *
 * Who plays whom: the fixture server is the project's `opencode serve` (agents' sessions, and here the leader's too);
 * the plugin runs inside it with short timings. This test process plays a second OpenCode process of the same project
 * that outlives the server, as the leader's own OpenCode does in real use: it builds the plugin's context against the
 * fixture (recorded in ServerInfo, as the server manager would) and runs the same background monitor and sweep. The
 * server's own monitor sees the events in-process; this one reads them over SSE. After the SIGKILL only this process
 * can notice the death, which is the situation the sweep exists for.
 *
 * Agents are registered by writing their state directly (spawn-agent is tested in spawn-kill.test.ts).
 */
import { afterAll, expect, test } from "bun:test";
import { UnavailableOpencodeApi } from "../../src/edges/unavailable.ts";
import type { LogLevel, TeamsContext } from "../../src/operations/context.ts";
import { type LivenessHandle, startLiveness } from "../../src/operations/liveness/background.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { parseOptions } from "../../src/options.ts";
import { buildContext } from "../../src/plugin.ts";
import type { AgentView } from "../../src/state/agent-view.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { type ToolResultInfo, useOpencode, waitFor } from "./harness/index.ts";

const TIMING = {
  staleThresholdMs: 3_000,
  sweepIntervalMs: 1_000,
  graceMisses: 2,
  eventCoalesceMs: 500,
  busyCapMs: 60_000,
  // The test records this server as the project's (it has no password): a prewarm would take it for one an older
  // version left unprotected and replace it.
  prewarmServer: false,
};

const fx = useOpencode({ pluginOptions: TIMING, waitForTools: ["heartbeat", "get-agent-status"] });

let liveness: LivenessHandle | undefined;
afterAll(async () => {
  await liveness?.release();
});

const logs: { level: LogLevel; message: string; extra?: Record<string, unknown> }[] = [];

function registerWorker(ctx: TeamsContext, teamName: string, name: string, sessionId: string) {
  return addAgent(ctx, teamName, { name, sessionId, heartbeatSource: "spawn", prompt: "work" });
}

async function view(ctx: TeamsContext, agent: AgentState): Promise<AgentView> {
  const read = await ctx.store.readAgentView(agent.teamName, agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agent.name} unreadable: ${read.kind}`);
  return read.value;
}

function output(result: ToolResultInfo | undefined): Record<string, unknown> {
  if (result?.status !== "completed")
    throw new Error(`tool ${result?.tool} ${result?.status}: ${result?.error}`);
  return JSON.parse(result.output ?? "null") as Record<string, unknown>;
}

test("real server: events keep an agent healthy, a SIGKILLed server makes it inactive, a restart reconnects", async () => {
  const server = fx.server;
  const ctx = buildContext({
    projectRoot: server.projectDir,
    options: parseOptions(TIMING),
    log: (level, message, extra) => logs.push({ level, message, extra }),
    // The leader's own OpenCode server is not part of this test: notices go to the leader's session on the project
    // server, the fallback.
    localServer: new UnavailableOpencodeApi("no local server in this test"),
  });
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });

  const leaderSession = await server.createSession("leader");
  const team = await createTeam(ctx, { teamName: "live" }, leaderSession);
  expect(team.success).toBe(true);
  const workerSession = await server.createSession("worker-1");
  const worker = await registerWorker(ctx, "live", "worker-1", workerSession);

  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  const { monitor } = liveness;
  await waitFor(() => monitor.stats.connects >= 1 && monitor.stats.resyncs >= 1, {
    timeoutMs: 10_000,
    message: "the monitor to connect to the server's event stream",
  });

  // --- 1. A turn of ~5 s (longer than the 3 s threshold) whose events keep the agent healthy.
  const samples: { ageMs: number; status: string; misses: number; source: string | undefined }[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const v = await view(ctx, worker);
      samples.push({
        ageMs: Date.now() - Date.parse(v.heartbeatTs),
        status: v.state.status,
        misses: v.state.consecutiveMisses,
        source: v.heartbeat?.source,
      });
      await Bun.sleep(100);
    }
  })();
  const agentEventsBefore = monitor.stats.agentEvents;
  const args = JSON.stringify({ teamName: "live", agentId: worker.agentId });
  await server.promptAndWait(
    workerSession,
    [
      `@@call heartbeat ${JSON.stringify({ teamName: "live", agentId: worker.agentId, metadata: { step: "one" } })}`,
      "@@sleep 1200",
      `@@call get-agent-status ${args}`,
      "@@sleep 1200",
      `@@call get-agent-status ${args}`,
      "@@sleep 1200",
      "@@say done",
    ].join("\n"),
    { timeoutMs: 30_000 },
  );
  sampling = false;
  await sampler;

  expect(output((await server.toolResults(workerSession, "heartbeat"))[0])).toMatchObject({
    success: true,
    agentStatus: "active",
  });
  for (const result of await server.toolResults(workerSession, "get-agent-status")) {
    const status = output(result) as {
      success: boolean;
      agents: { heartbeatHealthy: boolean; status: string }[];
    };
    expect(status.success).toBe(true);
    expect(status.agents[0]).toMatchObject({ heartbeatHealthy: true, status: "active" });
  }
  expect(samples.length).toBeGreaterThan(20);
  expect(samples.every((s) => s.status !== "inactive" && s.misses === 0)).toBe(true);
  expect(Math.max(...samples.map((s) => s.ageMs))).toBeLessThan(TIMING.staleThresholdMs);
  // The stream delivered this session's events to this process, and they were written as heartbeats.
  expect(monitor.stats.agentEvents).toBeGreaterThan(agentEventsBefore);
  expect(samples.some((s) => s.source?.startsWith("sdk_"))).toBe(true);
  const slot = (await view(ctx, worker)).heartbeat;
  expect(slot?.metadata).toEqual({ step: "one" });
  // The turn ended: session.idle makes the agent idle.
  await waitFor(async () => (await view(ctx, worker)).state.status === "idle", {
    timeoutMs: 5_000,
    message: "worker-1 to become idle after its turn",
  });

  // --- 2. A long silent turn: the server says busy, so the sweep keeps the agent alive without any event.
  await server.promptAsync(workerSession, "@@sleep 120000\n@@say too late");
  await waitFor(async () => (await view(ctx, worker)).state.status === "active", {
    timeoutMs: 5_000,
    message: "worker-1 to become active again",
  });
  const quiet: { status: string; misses: number; source: string | undefined; ageMs: number }[] = [];
  const quietUntil = Date.now() + TIMING.staleThresholdMs + 3 * TIMING.sweepIntervalMs;
  while (Date.now() < quietUntil) {
    const v = await view(ctx, worker);
    quiet.push({
      status: v.state.status,
      misses: v.state.consecutiveMisses,
      source: v.heartbeat?.source,
      ageMs: Date.now() - Date.parse(v.heartbeatTs),
    });
    await Bun.sleep(100);
  }
  expect(quiet.every((s) => s.status === "active" && s.misses === 0)).toBe(true);
  // The heartbeat went stale and a sweep vouched for the busy session (it is refreshed only once stale).
  expect(quiet.some((s) => s.source === "sweep_busy_check")).toBe(true);
  expect(Math.max(...quiet.map((s) => s.ageMs))).toBeLessThan(
    TIMING.staleThresholdMs + 2 * TIMING.sweepIntervalMs,
  );

  // --- 3. SIGKILL the server mid-turn: no events, no answers. Only the sweep in this process is left.
  const lastBeat = Date.parse((await view(ctx, worker)).heartbeatTs);
  server.kill("SIGKILL");
  await server.waitForExit();
  await waitFor(async () => (await view(ctx, worker)).state.status === "inactive", {
    timeoutMs: 30_000,
    intervalMs: 100,
    message: "worker-1 to become inactive after the server was killed",
  });
  const dead = await view(ctx, worker);
  const detectedAfterMs = Date.parse(dead.state.updatedAt) - lastBeat;
  console.error(`[liveness e2e] inactive ${detectedAfterMs} ms after the last heartbeat`);
  expect(detectedAfterMs).toBeLessThan(90_000);
  // Threshold + up to one sweep interval to the first miss + one interval to the second, with slack for a slow box.
  expect(detectedAfterMs).toBeLessThan(TIMING.staleThresholdMs + 3 * TIMING.sweepIntervalMs + 2_000);
  expect(dead.state.statusReason).toMatch(
    /^no heartbeat for \d+ s \(2 missed sweeps\); the project's OpenCode server/,
  );
  // The agent's state is written first, the notice right after it.
  const notice = await waitFor(
    async () => (await ctx.store.readInbox("live", team.success ? team.leaderAgentId : "")).items[0],
    { timeoutMs: 5_000, message: "the inactive notice in the leader's inbox" },
  );
  const expectedText = `Agent worker-1 (${worker.agentId}) became inactive: ${dead.state.statusReason}. Tasks returned to pending: none.`;
  expect(notice.text).toBe(expectedText);
  // The leader's session went down with the server: the notice waits in the inbox.
  expect(notice.deliveredAt).toBeUndefined();

  // --- 4. Restart: the monitor reconnects, re-reads statuses, and events flow again.
  const connectsBefore = monitor.stats.connects;
  const resyncsBefore = monitor.stats.resyncs;
  await server.restart();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  await waitFor(() => monitor.stats.connects > connectsBefore && monitor.stats.resyncs > resyncsBefore, {
    timeoutMs: 15_000,
    message: "the monitor to reconnect after the restart",
  });
  const secondSession = await server.createSession("worker-2");
  const second = await registerWorker(ctx, "live", "worker-2", secondSession);
  const eventsBefore = monitor.stats.agentEvents;
  await server.promptAndWait(secondSession, "@@sleep 300\n@@say hello", { timeoutMs: 30_000 });
  await waitFor(() => monitor.stats.agentEvents > eventsBefore, { timeoutMs: 5_000 });
  await waitFor(async () => (await view(ctx, second)).state.status === "idle", { timeoutMs: 5_000 });
  expect((await view(ctx, second)).heartbeat?.source).toMatch(/^sdk_/);

  // A sweep after the restart delivers the waiting notice into the leader's session, once.
  await waitFor(
    async () =>
      (await ctx.store.readInbox("live", team.success ? team.leaderAgentId : "")).items[0]?.deliveredAt,
    { timeoutMs: 10_000, message: "the notice to be delivered after the restart" },
  );
  const leaderTexts = (await server.messages(leaderSession)).flatMap((m) =>
    m.info.role === "user" ? m.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])) : [],
  );
  // Under the notice header (`[notice from opencode-teams via team live, id …]`, see specs/heartbeat.md).
  expect(leaderTexts.filter((text) => text.endsWith(`\n${expectedText}`))).toHaveLength(1);
  // noReply: the notice started no turn in the leader's session.
  expect((await server.messages(leaderSession)).filter((m) => m.info.role === "assistant")).toHaveLength(0);
  // The dead agent stays dead.
  expect((await view(ctx, worker)).state.status).toBe("inactive");
}, 90_000);

/**
 * Against a real `opencode serve`: a worker whose session lives in a sub-directory of the project (spawned with
 * `cwd`) and is busy in a long model call (the mock model holds its answer) is kept alive by the sweep, and its events
 * reach the monitor. OpenCode 1.18 lists `GET /session/status` and `GET /event` per directory, so asking only for the
 * project root made this worker look silent and the sweep declared it dead.
 */
import { expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { SdkOpencodeApi } from "../../src/edges/opencode-client.ts";
import type { TeamsContext } from "../../src/operations/context.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { useOpencode, waitFor } from "../e2e/harness/index.ts";
import { addAgent } from "../helpers/agents.ts";
import { builtContext } from "../helpers/context.ts";

const TIMING = { staleThresholdMs: 1_000, sweepIntervalMs: 1_000, graceMisses: 2, busyCapMs: 60_000 };

// No plugin in the server: this test process is the only one that sweeps.
const fx = useOpencode({ plugin: false, gitInit: true });

async function state(ctx: TeamsContext, agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent(agent.teamName, agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

test("real server: a busy worker in a sub-directory is kept alive by the sweep and heard by the monitor", async () => {
  const server = fx.server;
  const sub = path.join(server.projectDir, "packages", "web");
  mkdirSync(sub, { recursive: true });
  const api = new SdkOpencodeApi(server.url, { directory: server.projectDir });
  const base = builtContext(server.projectDir, TIMING, "no local server in this test");
  const ctx: TeamsContext = { ...base, edges: { ...base.edges, projectServer: async () => api } };
  await ctx.store.init();
  const leaderSession = await server.createSession("leader");
  expect((await createTeam(ctx, { teamName: "sub" }, leaderSession)).success).toBe(true);
  const workerSession = await server.createSession("worker", { directory: sub });
  const worker = await addAgent(ctx, "sub", {
    name: "worker",
    sessionId: workerSession,
    cwd: sub,
    heartbeatSource: "spawn",
  });

  const monitor = new EventMonitor(ctx);
  const stream = new AbortController();
  const consuming = monitor.consume(api, stream.signal);
  await waitFor(() => monitor.stats.connects >= 1 && monitor.stats.resyncs >= 1, {
    message: "the monitor to connect",
    timeoutMs: 10_000,
  });
  await monitor.settled();
  // The resync after connecting counts as agent events too: only what comes after it is the stream's.
  const afterResync = monitor.stats.agentEvents;

  // A long model call: the session is busy and sends nothing until the mock answers.
  // Sent as the plugin sends it, by a client that names the project root: OpenCode runs it in the session's directory.
  await api.promptAsync(workerSession, "@@sleep 60000\n@@say too late");
  const subStatus = async () => {
    const response = await fetch(`${server.url}/session/status?directory=${encodeURIComponent(sub)}`);
    return ((await response.json()) as Record<string, { type: string }>)[workerSession]?.type;
  };
  await waitFor(async () => (await subStatus()) === "busy", {
    message: "the worker's session to be busy",
    timeoutMs: 15_000,
  });
  // The prompt's own events (the user message, its part, the session updates) came through the stream.
  await waitFor(
    async () => {
      await monitor.settled();
      return monitor.stats.agentEvents > afterResync;
    },
    { message: "the worker's events to reach the monitor", timeoutMs: 10_000 },
  );
  // From here on only the sweep speaks for the worker: the stream's later events would refresh its heartbeat.
  stream.abort();
  await consuming;
  await monitor.settled();

  const sweeper = new StaleSweeper(ctx);
  const reports = [];
  for (let sweep = 0; sweep < TIMING.graceMisses + 2; sweep++) {
    await Bun.sleep(TIMING.staleThresholdMs + 100);
    reports.push(await sweeper.sweep());
  }
  expect(reports.map((r) => r.inactive.map((d) => d.reason))).toEqual([[], [], [], []]);
  expect(reports.map((r) => r.misses)).toEqual([0, 0, 0, 0]);
  expect(reports.every((r) => r.refreshed === 1 && r.serverReachable === true)).toBe(true);
  // Idle or active as the stream last said (the resync found it idle before the prompt), never inactive.
  const after = await state(ctx, worker);
  expect(after.status).not.toBe("inactive");
  expect(after.consecutiveMisses).toBe(0);
  expect((await ctx.store.readHeartbeat("sub", worker.agentId)).record?.source).toBe("sweep_busy_check");
  // A kill's abort, sent the same way, reaches the session's own directory too.
  await api.abortSession(workerSession);
  await waitFor(async () => [undefined, "idle"].includes(await subStatus()), {
    message: "the abort to end the worker's turn",
    timeoutMs: 10_000,
  });
}, 90_000);

/**
 * spawn-agent and kill-agent for real: a real `opencode serve` hosting the leader, the plugin cold-starting the
 * project's own `opencode serve` (ServerManager), real tmux panes on a private socket running `opencode attach`, and
 * scripted workers that read their identity from the system prompt and call `heartbeat` / `confirm-shutdown`.
 * A second server (PATH without tmux, a bogus opencode binary) carries the error rows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { basicAuthHeaders } from "../../src/edges/opencode-client.ts";
import { processCommandLine, processRunning, terminateProcess } from "../../src/edges/process-info.ts";
import { recordedCredentials } from "../../src/edges/server-auth.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { UnavailableOpencodeApi } from "../../src/edges/unavailable.ts";
import { killAgent } from "../../src/operations/agents/kill.ts";
import { type SpawnAgentOutput, spawnAgent } from "../../src/operations/agents/spawn.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { parseOptions } from "../../src/options.ts";
import { buildContext } from "../../src/plugin.ts";
import { StoragePaths } from "../../src/state/paths.ts";
import type { AgentState, ServerInfo } from "../../src/state/schemas.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { readServerInfo, writeServerInfo } from "../helpers/server-info.ts";
import {
  freePort,
  type MockModel,
  type MockRequest,
  OPENCODE_BIN,
  type OpencodeServer,
  type SessionMessage,
  startMockModel,
  startOpencode,
  type ToolResultInfo,
  tmux,
  waitFor,
} from "./harness/index.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const TEAMS_DIR = path.join(".opencode", "opencode-teams");

type SpawnOutput = SpawnAgentOutput & { success: boolean; error?: string };

let mock: MockModel;
let main: OpencodeServer;
let errors: OpencodeServer;
const socket = tmux.tmuxSocketName("oct-spawn");
/** A bogus opencode binary and a PATH without tmux for the error-row server. */
const scratch = path.join(tmpdir(), `oct-e2e-bin-${process.pid}`);
/** Processes the plugin started for us (the project server, attach panes): stopped by pid in afterAll. */
const ours = new Set<number>();

function json<T>(result: ToolResultInfo | undefined): T {
  if (!result) throw new Error("no tool result");
  if (result.status !== "completed")
    throw new Error(`tool ${result.tool} ${result.status}: ${result.error ?? ""}`);
  return JSON.parse(result.output ?? "null") as T;
}

/** Run one tool call in a session through the scripted model and return its parsed output. */
async function callTool<T>(
  server: OpencodeServer,
  sessionId: string,
  tool: string,
  args: unknown,
): Promise<T> {
  const before = (await server.toolResults(sessionId, tool)).length;
  await server.promptAndWait(sessionId, `@@call ${tool} ${JSON.stringify(args)}`, { timeoutMs: 80_000 });
  const results = await server.toolResults(sessionId, tool);
  expect(results.length).toBe(before + 1);
  return json<T>(results[results.length - 1]);
}

function toolMs(result: ToolResultInfo | undefined): number {
  const state = result?.part.state as { time?: { start: number; end?: number } } | undefined;
  return state?.time?.end && state.time.start ? state.time.end - state.time.start : Number.NaN;
}

const storageOf = (projectDir: string) => new StoragePaths(path.join(projectDir, TEAMS_DIR));

function readInfo(projectDir: string): ServerInfo | undefined {
  const file = storageOf(projectDir).serverInfo(projectDir);
  return existsSync(file) ? readServerInfo(file) : undefined;
}

/** The agent's state as the plugin's store reads it. */
async function agentFile(projectDir: string, team: string, agentId: string): Promise<AgentState> {
  const read = await new TeamStore(storageOf(projectDir)).readAgent(team, agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agentId}: ${read.kind}`);
  return read.value;
}

/** GET a JSON route of the project server the plugin started, with the credentials it recorded. */
async function getJson<T>(url: string, route: string, directory: string): Promise<T> {
  const sep = route.includes("?") ? "&" : "?";
  const info = readInfo(directory);
  const res = await fetch(`${url}${route}${sep}directory=${encodeURIComponent(directory)}`, {
    headers: basicAuthHeaders((info && recordedCredentials(info)) ?? {}),
    signal: AbortSignal.timeout(10_000),
  });
  if (!res.ok) throw new Error(`GET ${route}: ${res.status}`);
  return (await res.json()) as T;
}

function toolParts(messages: SessionMessage[], tool: string) {
  return messages.flatMap((m) =>
    m.parts.flatMap((p) =>
      p.type === "tool" && p.tool === tool && p.state.status === "completed" ? [p.state.output] : [],
    ),
  );
}

/** A worker's scripted first prompt: it heartbeats with the id it only learns from its injected identity. */
const WORKER_SCRIPT = [
  "Scripted worker.",
  '@@call heartbeat {"teamName":"alpha","agentId":"{{sys:agentId}}","metadata":{"step":"started"}}',
  "@@say working",
].join("\n");

const PROXY = path.join(import.meta.dir, "fixtures", "opencode-blocking-proxy.ts");

/**
 * A proxy in front of an OpenCode server that fails `prompt_async` (tests/e2e/fixtures/opencode-blocking-proxy.ts),
 * run as a process of its own: registered as the project's server in ServerInfo, it passes the identity check.
 */
async function promptBlockingProxy(
  target: string,
  projectDir: string,
): Promise<{ pid: number; port: number; stop(): Promise<void> }> {
  const port = await freePort();
  const child = Bun.spawn(
    [process.execPath, PROXY, "serve", "--hostname", "127.0.0.1", "--port", String(port), "--target", target],
    {
      stdio: ["ignore", "ignore", "inherit"],
      // The project's markers, as the server manager gives the servers it starts: the plugin trusts no other.
      env: {
        ...process.env,
        OPENCODE_TEAMS_PROJECT_ROOT: projectDir,
        OPENCODE_TEAMS_DIR: path.join(projectDir, TEAMS_DIR),
      },
    },
  );
  reaper(child.pid);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined)) !== undefined, {
    message: "the proxy to listen",
  });
  return { pid: child.pid, port, stop: async () => void (await terminateProcess(child.pid, 2_000)) };
}

/** Record a project server, with the credentials already recorded (or a made-up password for an open server). */
async function registerProjectServer(projectDir: string, pid: number, port: number): Promise<void> {
  const auth = readInfo(projectDir)?.auth ?? {
    source: "generated",
    username: "opencode",
    password: "proxy-pw",
  };
  await writeServerInfo(projectDir, storageOf(projectDir), { pid, port, auth });
}

/** Kill a detached process if the test process dies first (the harness does the same for its servers). */
function reaper(pid: number): void {
  const script = `while kill -0 ${process.pid} 2>/dev/null; do kill -0 ${pid} 2>/dev/null || exit 0; sleep 1; done; kill -TERM ${pid}; sleep 2; kill -KILL ${pid}`;
  Bun.spawn(["sh", "-c", script], { stdio: ["ignore", "ignore", "ignore"] }).unref();
}

/** A PATH with every program of the current PATH except tmux. */
function pathWithoutTmux(dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const entry of (process.env.PATH ?? "").split(":")) {
    if (!entry || !existsSync(entry)) continue;
    for (const name of readdirSync(entry)) {
      if (name === "tmux" || existsSync(path.join(dir, name))) continue;
      try {
        symlinkSync(path.join(entry, name), path.join(dir, name));
      } catch {
        // duplicate name raced or unreadable entry
      }
    }
  }
  return dir;
}

beforeAll(async () => {
  mock = await startMockModel();
  const options = { tmuxSocket: socket, shutdownTimeoutMs: 20_000 };
  const mainStart = startOpencode({
    mockBaseUrl: mock.baseUrl,
    gitInit: true,
    pluginOptions: options,
    env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  });
  const errorsStart = (async () => {
    const bogus = path.join(scratch, "bogus-opencode");
    mkdirSync(scratch, { recursive: true });
    writeFileSync(bogus, '#!/bin/sh\necho "bogus opencode: refusing to serve" >&2\nexit 3\n');
    chmodSync(bogus, 0o755);
    return startOpencode({
      mockBaseUrl: mock.baseUrl,
      gitInit: true,
      pluginOptions: { ...options, promptRetryDelayMs: 200 },
      env: { PATH: pathWithoutTmux(path.join(scratch, "bin")), OPENCODE_TEAMS_OPENCODE_BIN: bogus },
    });
  })();
  [main, errors] = await Promise.all([mainStart, errorsStart]);
  await Promise.all([
    main.waitForToolIds(["create-team", "spawn-agent", "kill-agent", "confirm-shutdown", "heartbeat"]),
    errors.waitForToolIds(["spawn-agent"]),
  ]);
}, 90_000);

afterAll(async () => {
  tmux.killServer(socket);
  removeSocketFile(socket);
  // Whatever project server is recorded last is ours too: a test that failed midway (e.g. with the proxy registered)
  // can make a later spawn start a new one that no test added to `ours`.
  for (const server of [main, errors]) {
    const info = server ? readInfo(server.projectDir) : undefined;
    if (info && (await processCommandLine(info.pid))?.includes("serve")) ours.add(info.pid);
  }
  for (const pid of ours) await terminateProcess(pid, 2_000);
  await Promise.all([main?.stop(), errors?.stop()]);
  await mock?.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe("spawn-agent and kill-agent on a real server and real tmux", () => {
  let leader: string;
  let projectServer: ServerInfo;
  const spawned: SpawnOutput[] = [];

  test("the leader spawns a worker: the project server is cold-started, a pane attaches, the worker heartbeats", async () => {
    leader = await main.createSession("leader");
    expect(await callTool(main, leader, "create-team", { teamName: "alpha" })).toMatchObject({
      success: true,
    });
    expect(readInfo(main.projectDir)).toBeUndefined();

    const w1 = await callTool<SpawnOutput>(main, leader, "spawn-agent", {
      teamName: "alpha",
      name: "w1",
      prompt: WORKER_SCRIPT,
    });
    const coldMs = toolMs((await main.toolResults(leader, "spawn-agent"))[0]);
    console.error(`[e2e] cold spawn (server start + session + pane + prompt): ${coldMs} ms`);
    expect(w1).toMatchObject({ success: true, name: "w1", status: "active", promptDelivery: "sdk" });
    expect(w1.paneId).toMatch(/^%\d+$/);
    spawned.push(w1);

    // ServerManager started a second, detached `opencode serve` in the project root, on a port of 28000-28999.
    const info = readInfo(main.projectDir);
    if (!info) throw new Error("no ServerInfo");
    projectServer = info;
    ours.add(info.pid);
    reaper(info.pid);
    expect(info.pid).not.toBe(main.pid);
    expect(info.port).toBe(w1.port);
    expect(info.port).toBeGreaterThanOrEqual(28_000);
    expect(info.port).toBeLessThanOrEqual(28_999);
    expect(await processCommandLine(info.pid)).toEqual(expect.arrayContaining(["serve", String(info.port)]));
    const url = `http://127.0.0.1:${info.port}`;

    // The pane runs `opencode attach <url> --session <id>` as its own process (no shell), in the team's window.
    const pane = tmux.listPanes(socket).find((p) => p.paneId === w1.paneId);
    expect(pane).toMatchObject({ sessionName: "teams-alpha", windowName: "team-alpha", paneDead: false });
    const state = await agentFile(main.projectDir, "alpha", w1.agentId);
    expect(state.attachPid).toBe(pane?.panePid);
    if (typeof state.attachPid === "number") ours.add(state.attachPid);
    const argv = (await processCommandLine(pane?.panePid ?? -1)) ?? [];
    expect(argv.slice(1)).toEqual(["attach", url, "--session", w1.sessionId, "--dir", main.projectDir]);
    expect(
      tmux.tmux(socket, ["display-message", "-p", "-t", w1.paneId ?? "", "#{@agent_id}"]).stdout.trim(),
    ).toBe(w1.agentId);

    // The worker's session lives on the project server; its model saw the identity and called heartbeat with it.
    const outputs = await waitFor(
      async () => {
        const messages = await getJson<SessionMessage[]>(
          url,
          `/session/${w1.sessionId}/message`,
          main.projectDir,
        );
        const found = toolParts(messages, "heartbeat");
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 30_000, message: "the worker's heartbeat" },
    );
    expect(JSON.parse(outputs[0] ?? "null")).toMatchObject({ success: true });
    const workerRequests = mock.requests.filter(
      (r: MockRequest) => r.lastUserText.startsWith("Scripted worker.") && !r.isTitleRequest,
    );
    expect(workerRequests[0]?.system).toContain(`- agentId: ${w1.agentId}`);
    expect(workerRequests[0]?.tools).toEqual(expect.arrayContaining(["heartbeat", "confirm-shutdown"]));
    expect(workerRequests[0]?.lastUserText).toBe(WORKER_SCRIPT);
    // Delivered exactly once, verified by the message count, not re-sent.
    const messages = await getJson<SessionMessage[]>(
      url,
      `/session/${w1.sessionId}/message`,
      main.projectDir,
    );
    expect(messages.filter((m) => m.info.role === "user")).toHaveLength(1);
  }, 90_000);

  test("a second spawn reuses the running server (warm) and gets its own pane and color", async () => {
    const w2 = await callTool<SpawnOutput>(main, leader, "spawn-agent", {
      teamName: "alpha",
      name: "w2",
      prompt: WORKER_SCRIPT,
    });
    const warmMs = toolMs((await main.toolResults(leader, "spawn-agent"))[1]);
    console.error(`[e2e] warm spawn: ${warmMs} ms`);
    expect(w2).toMatchObject({ success: true, status: "active", port: projectServer.port });
    expect(w2.paneId).not.toBe(spawned[0]?.paneId);
    expect(w2.color).not.toBe(spawned[0]?.color);
    expect(readInfo(main.projectDir)?.pid).toBe(projectServer.pid);
    const panes = tmux.listPanes(socket).filter((p) => p.windowName === "team-alpha");
    expect(panes).toHaveLength(2);
    const attachPid = (await agentFile(main.projectDir, "alpha", w2.agentId)).attachPid;
    if (typeof attachPid === "number") ours.add(attachPid);
    spawned.push(w2);
    expect(readInfo(main.projectDir)?.activeSessions).toBe(2);
  }, 60_000);

  test("force kill leaves no pane, no attach process and no busy session", async () => {
    const w1 = spawned[0] as SpawnOutput;
    const attachPid = (await agentFile(main.projectDir, "alpha", w1.agentId)).attachPid as number;
    const result = await callTool(main, leader, "kill-agent", {
      teamName: "alpha",
      agentId: w1.agentId,
      force: true,
    });
    console.error(`[e2e] force kill: ${toolMs((await main.toolResults(leader, "kill-agent"))[0])} ms`);
    expect(result).toMatchObject({ success: true, method: "force", phase: "forced", reassignedTasks: [] });
    expect(tmux.listPanes(socket).some((p) => p.paneId === w1.paneId)).toBe(false);
    expect(processRunning(attachPid)).toBe(false);
    const statuses = await getJson<Record<string, { type: string }>>(
      `http://127.0.0.1:${projectServer.port}`,
      "/session/status",
      main.projectDir,
    );
    expect(statuses[w1.sessionId]?.type ?? "idle").toBe("idle");
    expect(await agentFile(main.projectDir, "alpha", w1.agentId)).toMatchObject({ status: "terminated" });
    expect(readInfo(main.projectDir)?.activeSessions).toBe(1);
  }, 60_000);

  test("resume-agent continues the force-killed worker on its old session; it sees its conversation and completes", async () => {
    const w1 = spawned[0] as SpawnOutput;
    const url = `http://127.0.0.1:${projectServer.port}`;
    const resumeScript = [
      "Scripted resume.",
      '@@call heartbeat {"teamName":"alpha","agentId":"{{sys:agentId}}"}',
      // Held until the test has looked at the fresh pane, which completion closes.
      "@@wait resume-checked",
      '@@call complete-agent {"teamName":"alpha","agentId":"{{sys:agentId}}","status":"completed","summary":"finished after resume"}',
    ].join("\n");
    const resumed = await callTool<SpawnOutput & { resumedFrom: string; sessionReused: boolean }>(
      main,
      leader,
      "resume-agent",
      { teamName: "alpha", agentId: w1.agentId, prompt: resumeScript },
    );
    expect(resumed).toMatchObject({
      success: true,
      resumedFrom: w1.agentId,
      sessionReused: true,
      sessionId: w1.sessionId,
      name: "w1",
      status: "active",
      promptDelivery: "sdk",
    });
    expect(resumed.agentId).not.toBe(w1.agentId);
    const pane = tmux.listPanes(socket).find((p) => p.paneId === resumed.paneId);
    expect(pane?.paneDead).toBe(false);
    const attachPid = (await agentFile(main.projectDir, "alpha", resumed.agentId)).attachPid;
    if (typeof attachPid === "number") ours.add(attachPid);
    expect(((await processCommandLine(pane?.panePid ?? -1)) ?? []).slice(1, 5)).toEqual([
      "attach",
      url,
      "--session",
      w1.sessionId,
    ]);

    // The model's first request of the resumed run carries the earlier conversation and the new identity.
    const firstResumed = await waitFor(
      async () =>
        mock.requests.find((r: MockRequest) => r.lastUserText === resumeScript && !r.isTitleRequest),
      { timeoutMs: 30_000, message: "the resumed worker's first model request" },
    );
    const earlierUserTexts = firstResumed.messages
      .filter((m) => m.role === "user")
      .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
    expect(earlierUserTexts.some((text) => text.includes("Scripted worker."))).toBe(true);
    expect(firstResumed.system).toContain(`- agentId: ${resumed.agentId}`);
    mock.open("resume-checked");

    // It heartbeats and completes as its new self; completion closes its pane and records the summary.
    const messages = await waitFor(
      async () => {
        const all = await getJson<SessionMessage[]>(url, `/session/${w1.sessionId}/message`, main.projectDir);
        return toolParts(all, "complete-agent").length > 0 ? all : undefined;
      },
      { timeoutMs: 30_000, message: "the resumed worker's complete-agent call" },
    );
    expect(await agentFile(main.projectDir, "alpha", resumed.agentId)).toMatchObject({
      status: "terminated",
      outcome: "completed",
      resumes: w1.agentId,
    });
    expect(JSON.parse(toolParts(messages, "heartbeat").at(-1) ?? "null")).toMatchObject({ success: true });
    expect(JSON.parse(toolParts(messages, "complete-agent")[0] ?? "null")).toMatchObject({
      success: true,
      status: "completed",
      paneClosed: true,
    });
    expect(tmux.listPanes(socket).some((p) => p.paneId === resumed.paneId)).toBe(false);
    const history = await callTool<{
      entries: {
        agent_id: string;
        status: string;
        resumed_by?: string;
        resumes?: string;
        summary?: string;
      }[];
    }>(main, leader, "agent-history", { teamName: "alpha" });
    expect(history.entries.find((e) => e.agent_id === w1.agentId)).toMatchObject({
      status: "resumed",
      resumed_by: resumed.agentId,
    });
    expect(history.entries.find((e) => e.agent_id === resumed.agentId)).toMatchObject({
      status: "completed",
      resumes: w1.agentId,
      summary: "finished after resume",
    });
    expect(readInfo(main.projectDir)?.activeSessions).toBe(1);
  }, 90_000);

  test("graceful kill: the worker is asked, calls confirm-shutdown, and is stopped", async () => {
    const w2 = spawned[1] as SpawnOutput;
    const attachPid = (await agentFile(main.projectDir, "alpha", w2.agentId)).attachPid as number;
    // The scripted worker answers a shutdown request by confirming with the ids from its identity.
    const off = mock.onSession("asks you to shut down", (req) =>
      req.turnMessages.length === 0
        ? {
            kind: "tool",
            name: "confirm-shutdown",
            args: { teamName: "alpha", agentId: /- agentId: (\S+)/.exec(req.system)?.[1] },
          }
        : undefined,
    );
    try {
      const result = await callTool(main, leader, "kill-agent", { teamName: "alpha", agentId: w2.agentId });
      expect(result).toMatchObject({ success: true, method: "graceful", phase: "confirmed" });
      console.error(`[e2e] graceful kill: ${toolMs((await main.toolResults(leader, "kill-agent"))[1])} ms`);
    } finally {
      off();
    }
    const messages = await getJson<SessionMessage[]>(
      `http://127.0.0.1:${projectServer.port}`,
      `/session/${w2.sessionId}/message`,
      main.projectDir,
    );
    expect(JSON.parse(toolParts(messages, "confirm-shutdown")[0] ?? "null")).toMatchObject({ success: true });
    expect(tmux.listPanes(socket).some((p) => p.windowName === "team-alpha")).toBe(false);
    expect(processRunning(attachPid)).toBe(false);
    const statuses = await getJson<Record<string, { type: string }>>(
      `http://127.0.0.1:${projectServer.port}`,
      "/session/status",
      main.projectDir,
    );
    expect(statuses[w2.sessionId]?.type ?? "idle").toBe("idle");
    expect(await agentFile(main.projectDir, "alpha", w2.agentId)).toMatchObject({
      status: "terminated",
      outcome: "killed",
    });
    expect(readInfo(main.projectDir)?.activeSessions).toBe(0);
  }, 60_000);
});

describe("prompt delivery falls back to typing into the pane", () => {
  test("prompt_async fails: the prompt is typed into the real TUI and the worker runs it", async () => {
    const leader = (await main.client.session.list()).data?.find((s) => s.title === "leader")?.id;
    const info = readInfo(main.projectDir);
    if (!leader || !info) throw new Error("the first describe did not run");
    const proxy = await promptBlockingProxy(`http://127.0.0.1:${info.port}`, main.projectDir);
    let running: string | undefined;
    try {
      await registerProjectServer(main.projectDir, proxy.pid, proxy.port);
      const w3 = await callTool<SpawnOutput>(main, leader, "spawn-agent", {
        teamName: "alpha",
        name: "w3",
        prompt: WORKER_SCRIPT,
      });
      running = w3.agentId;
      const ms = toolMs((await main.toolResults(leader, "spawn-agent")).at(-1));
      console.error(`[e2e] spawn with typed fallback: ${ms} ms`);
      expect(w3).toMatchObject({ success: true, status: "active", promptDelivery: "pane" });
      const attachPid = (await agentFile(main.projectDir, "alpha", w3.agentId)).attachPid;
      if (typeof attachPid === "number") ours.add(attachPid);
      const outputs = await waitFor(
        async () => {
          const messages = await getJson<SessionMessage[]>(
            `http://127.0.0.1:${info.port}`,
            `/session/${w3.sessionId}/message`,
            main.projectDir,
          );
          const found = toolParts(messages, "heartbeat");
          return found.length > 0 ? found : undefined;
        },
        { timeoutMs: 30_000, message: "the typed worker's heartbeat" },
      );
      expect(JSON.parse(outputs[0] ?? "null")).toMatchObject({ success: true });
      const kill = await callTool(main, leader, "kill-agent", {
        teamName: "alpha",
        agentId: w3.agentId,
        force: true,
      });
      running = undefined;
      expect(kill).toMatchObject({ success: true, method: "force" });
      expect(typeof attachPid === "number" && processRunning(attachPid)).toBe(false);
    } finally {
      await registerProjectServer(main.projectDir, info.pid, info.port);
      await proxy.stop();
      // A failure above must not leave w3 running: later tests count the project's running agents.
      if (running)
        await callTool(main, leader, "kill-agent", { teamName: "alpha", agentId: running, force: true });
    }
  }, 90_000);
});

describe("concurrency on the real path", () => {
  test("five spawns at once from another process of the project: one window, five panes, five colors", async () => {
    const info = readInfo(main.projectDir);
    if (!info) throw new Error("no project server");
    const ctx = buildContext({
      projectRoot: main.projectDir,
      options: parseOptions({ tmuxSocket: socket, background: false, opencodeBin: OPENCODE_BIN }),
      log: () => {},
      localServer: new UnavailableOpencodeApi("not used"),
    });
    // Panes inherit the tmux server's environment; keep them hermetic whoever starts that server.
    ctx.edges.tmux = new TmuxCli("tmux", main.env);
    const team = await createTeam(ctx, { teamName: "gamma" }, "ses_gamma_leader");
    expect(team.success).toBe(true);
    // Counted from the project's agent files: whatever earlier tests left running counts too.
    const runningBefore = readInfo(main.projectDir)?.activeSessions ?? 0;
    const started = Date.now();
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map(() =>
        spawnAgent(ctx, { teamName: "gamma", prompt: "@@say hi" }, "ses_gamma_leader"),
      ),
    );
    console.error(`[e2e] 5 concurrent spawns: ${Date.now() - started} ms`);
    const spawned = results.map((r) => {
      if (!r.success) throw new Error(r.error);
      return r;
    });
    for (const r of spawned) {
      const pid = (await agentFile(main.projectDir, "gamma", r.agentId)).attachPid;
      if (typeof pid === "number") ours.add(pid);
    }
    expect(spawned.every((r) => r.status === "active" && r.port === info.port)).toBe(true);
    expect(readInfo(main.projectDir)?.activeSessions).toBe(runningBefore + 5);
    expect(new Set(spawned.map((r) => r.color)).size).toBe(5);
    expect(new Set(spawned.map((r) => r.name))).toEqual(
      new Set(["worker-1", "worker-2", "worker-3", "worker-4", "worker-5"]),
    );
    const panes = tmux.listPanes(socket).filter((p) => p.sessionName === "teams-gamma");
    expect(panes.map((p) => p.paneId).sort()).toEqual(spawned.map((r) => r.paneId ?? "").sort());
    expect(new Set(panes.map((p) => `${p.windowIndex}:${p.windowName}`))).toEqual(
      new Set([`${panes[0]?.windowIndex}:team-gamma`]),
    );

    const kills = await Promise.all(
      spawned.map((r) =>
        killAgent(ctx, { teamName: "gamma", agentId: r.agentId, force: true }, "ses_gamma_leader"),
      ),
    );
    expect(kills.every((k) => k.success)).toBe(true);
    expect(tmux.listPanes(socket).filter((p) => p.sessionName === "teams-gamma")).toEqual([]);
    for (const r of spawned) {
      const pid = (await agentFile(main.projectDir, "gamma", r.agentId)).attachPid;
      expect(typeof pid === "number" && processRunning(pid)).toBe(false);
    }
    expect(readInfo(main.projectDir)?.activeSessions).toBe(runningBefore);
  }, 90_000);
});

describe("spawn-agent error rows on a real server", () => {
  let leader: string;

  test("not the leader; unknown team; tmux missing; a server that cannot start", async () => {
    leader = await errors.createSession("leader");
    expect(await callTool(errors, leader, "create-team", { teamName: "beta" })).toMatchObject({
      success: true,
    });
    const stranger = await errors.createSession("stranger");

    const args = { teamName: "beta", prompt: "hello" };
    expect(await callTool(errors, stranger, "spawn-agent", args)).toEqual({
      success: false,
      error: "Only the team leader can spawn agents",
    });
    expect(await callTool(errors, leader, "spawn-agent", { ...args, teamName: "nope" })).toEqual({
      success: false,
      error: "Team 'nope' does not exist",
    });
    expect(await callTool(errors, leader, "spawn-agent", args)).toEqual({
      success: false,
      error: "tmux is required for agent spawning",
    });
    const noServer = await callTool<{ success: boolean; error: string }>(errors, leader, "spawn-agent", {
      ...args,
      headless: true,
    });
    expect(noServer.success).toBe(false);
    expect(noServer.error).toMatch(
      /^Failed to start OpenCode server: .*bogus-opencode serve exited with code 3/,
    );
    expect(noServer.error).toContain("bogus opencode: refusing to serve");
    // Nothing of the failed spawns remains.
    const team = JSON.parse(
      readFileSync(path.join(errors.projectDir, TEAMS_DIR, "teams", "beta", "config.json"), "utf8"),
    ) as { members: unknown[] };
    expect(team.members).toHaveLength(1);
  }, 90_000);

  test("prompt delivery failure: the agent stays spawning and the response says so", async () => {
    // A project server whose prompt_async always fails: a proxy in front of the real server, registered as the
    // project's server (ServerInfo), so ensureRunning reuses it. Headless: no pane to type into either.
    const proxy = await promptBlockingProxy(errors.url, errors.projectDir);
    try {
      await registerProjectServer(errors.projectDir, proxy.pid, proxy.port);
      const result = await callTool<SpawnOutput>(errors, leader, "spawn-agent", {
        teamName: "beta",
        prompt: "never arrives",
        headless: true,
      });
      expect(result).toMatchObject({ success: true, status: "spawning", promptDelivery: "failed" });
      expect(result.warnings?.[0]).toContain("The initial prompt could not be delivered");
      expect(result.warnings?.[0]).toContain("attempt 3:");
      expect(await agentFile(errors.projectDir, "beta", result.agentId)).toMatchObject({
        status: "spawning",
      });
      const messages = (await errors.client.session.messages({ path: { id: result.sessionId } })).data ?? [];
      expect(messages).toHaveLength(0);
    } finally {
      await proxy.stop();
    }
  }, 60_000);
});

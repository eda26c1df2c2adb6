/**
 * The leader's side against a real `opencode serve` (tests that need OpenCode itself, not a stand-in): a context on an
 * e2e fixture's project whose project server a ServerManager starts, and a scripted worker's heartbeat read back.
 */
import { afterAll, expect } from "bun:test";
import { readFileSync } from "node:fs";
import { processCommandLine, processRunning, terminateProcess } from "../../src/edges/process-info.ts";
import type { ServerCredentials } from "../../src/edges/server-auth.ts";
import { type ProjectServer, ServerManager } from "../../src/edges/server-manager.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { spawnAgent } from "../../src/operations/agents/spawn.ts";
import type { TeamsContext } from "../../src/operations/context.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { TeamsOptions } from "../../src/options.ts";
import {
  type MockModel,
  OPENCODE_BIN,
  type OpencodeServer,
  type SessionMessage,
  startMockModel,
  startOpencode,
  tmux,
  waitFor,
} from "../e2e/harness/index.ts";
import { removeSocketFile } from "../e2e/tmux-socket-file.ts";
import { builtContext } from "./context.ts";

/** A test file's run against a real server: a tmux socket of its own and the pids its test started. */
export interface RealServerRun {
  socket: string;
  /** Pids the test started (the project server, a pane's `opencode attach`): stopped after all the file's tests. */
  ours: Set<number>;
  /** Starts the mock model and the fixture (`opencode serve` on a git project, the plugin on this socket). */
  start(): Promise<OpencodeServer>;
}

/** A RealServerRun whose tmux server, pids, fixture and mock model are stopped after all the file's tests. */
export function realServerRun(socketPrefix: string): RealServerRun {
  const socket = tmux.tmuxSocketName(socketPrefix);
  const ours = new Set<number>();
  let mock: MockModel | undefined;
  let main: OpencodeServer | undefined;
  afterAll(async () => {
    tmux.killServer(socket);
    removeSocketFile(socket);
    for (const pid of ours) await terminateProcess(pid, 2_000);
    await main?.stop();
    await mock?.stop();
  }, 30_000);
  return {
    socket,
    ours,
    async start() {
      mock = await startMockModel();
      const pluginOptions = { tmuxSocket: socket, background: false };
      main = await startOpencode({ mockBaseUrl: mock.baseUrl, gitInit: true, pluginOptions });
      return main;
    },
  };
}

/**
 * This process as the leader's on `main`'s project (`options` over background off and the fixture's opencode binary);
 * its project server is started by `servers` with `env` (the fixture's hermetic HOME/XDG dirs, and any password).
 */
export function leaderOnRealServer(
  main: OpencodeServer,
  options: Partial<TeamsOptions>,
  env: NodeJS.ProcessEnv,
): { ctx: TeamsContext; servers: ServerManager } {
  const ctx = builtContext(main.projectDir, { background: false, opencodeBin: OPENCODE_BIN, ...options });
  const servers = new ServerManager({
    projectRoot: main.projectDir,
    paths: ctx.store.paths,
    startTimeoutMs: 60_000,
    opencodeBin: OPENCODE_BIN,
    env,
  });
  ctx.edges.ensureProjectServer = () => servers.ensureRunning();
  ctx.edges.projectServer = async () => (await servers.current())?.api;
  return { ctx, servers };
}

/** A scripted worker (the mock model) that sends a heartbeat to `teamName`, then says "working". */
export function heartbeatScript(teamName: string): string {
  return [
    "Scripted worker.",
    `@@call heartbeat {"teamName":"${teamName}","agentId":"{{sys:agentId}}"}`,
    "@@say working",
  ].join("\n");
}

/**
 * A team `teamName` led by `leaderSessionId`, and the heartbeat worker spawned into it (in a pane); returns the spawn's
 * answer, the project server it runs on and the pid of its pane's `opencode attach`.
 */
export async function spawnHeartbeatWorker(
  ctx: TeamsContext,
  servers: ServerManager,
  teamName: string,
  leaderSessionId: string,
) {
  const team = await createTeam(ctx, { teamName }, leaderSessionId);
  if (!team.success) throw new Error(`createTeam failed: ${team.error}`);
  const spawned = await spawnAgent(ctx, { teamName, prompt: heartbeatScript(teamName) }, leaderSessionId);
  if (!spawned.success) throw new Error(spawned.error);
  const server: ProjectServer | undefined = await servers.current();
  if (!server) throw new Error("no project server");
  const agent = await ctx.store.readAgent(teamName, spawned.agentId);
  const attachPid = agent.kind === "ok" ? agent.value.attachPid : undefined;
  if (attachPid === undefined) throw new Error(`agent ${spawned.agentId} has no attach pid`);
  return { spawned, server, attachPid };
}

/**
 * The leader's context on `main` (leaderOnRealServer, panes on the run's tmux socket) and the heartbeat worker spawned
 * in a pane of team "sec"; the project server and the pane's attach are tracked for the run to stop.
 */
export async function paneWorkerOnRealServer(
  run: RealServerRun,
  main: OpencodeServer,
  env: NodeJS.ProcessEnv,
) {
  const { ctx, servers } = leaderOnRealServer(main, { tmuxSocket: run.socket }, env);
  ctx.edges.tmux = new TmuxCli("tmux", main.env);
  const worker = await spawnHeartbeatWorker(ctx, servers, "sec", "ses_sec_leader");
  run.ours.add(worker.server.info.pid);
  run.ours.add(worker.attachPid);
  return { ctx, ...worker };
}

/** The headers that get in with `credentials` (none for a server without a password). */
export function basicAuth(credentials: ServerCredentials | undefined): Record<string, string> {
  if (!credentials) return {};
  const token = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
  return { Authorization: `Basic ${token}` };
}

/**
 * Waits for the session's first heartbeat call to finish, read from the server at `url` for `directory`: its output,
 * or `error: <why>` when the call failed.
 */
export async function heartbeatResult(
  url: string,
  sessionId: string,
  directory: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<string> {
  const route = `${url}/session/${sessionId}/message?directory=${encodeURIComponent(directory)}`;
  return waitFor(
    async () => {
      const messages = (await (await fetch(route, { headers })).json()) as SessionMessage[];
      return messages
        .flatMap((message) => message.parts)
        .flatMap((part) => {
          if (part.type !== "tool" || part.tool !== "heartbeat") return [];
          if (part.state.status === "completed") return [part.state.output];
          return part.state.status === "error" ? [`error: ${part.state.error}`] : [];
        })[0];
    },
    { timeoutMs, message: `the heartbeat call of session ${sessionId}` },
  );
}

/**
 * Asserts that the pane's `opencode attach` got `password` through its environment and stays connected with it, and
 * that neither its command line nor the server's shows it (`ps` shows those to every user of the machine).
 */
export async function expectPasswordOnlyInEnvironment(
  serverPid: number,
  attachPid: number,
  password: string,
): Promise<void> {
  const environ = readFileSync(`/proc/${attachPid}/environ`, "utf8").split("\u0000");
  expect(environ).toContain(`OPENCODE_SERVER_PASSWORD=${password}`);
  await Bun.sleep(2_000);
  expect(processRunning(attachPid)).toBe(true);
  for (const pid of [serverPid, attachPid]) {
    const argv = (await processCommandLine(pid)) ?? [];
    expect(argv.length).toBeGreaterThan(0);
    expect(argv.join(" ")).not.toContain(password);
  }
}

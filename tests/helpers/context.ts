import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ManualClock } from "../../src/clock.ts";
import { localFiles } from "../../src/edges/files.ts";
import { GitCli } from "../../src/edges/git.ts";
import { hostProcesses } from "../../src/edges/process-info.ts";
import type { ServerCredentials } from "../../src/edges/server-auth.ts";
import { ServerStartError } from "../../src/edges/server-manager.ts";
import { UnavailableOpencodeApi } from "../../src/edges/unavailable.ts";
import type { LogLevel, TeamsContext, TeamsEdges } from "../../src/operations/context.ts";
import { sparesSettled } from "../../src/operations/worktrees/spare.ts";
import { parseOptions, type TeamsOptions } from "../../src/options.ts";
import { buildContext } from "../../src/plugin.ts";
import { resolveStorageRoot, StoragePaths } from "../../src/state/paths.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { FakeOpencode, FakeTmux } from "./fakes.ts";

export interface TestContext extends TeamsContext {
  clock: ManualClock;
  /** The project's server (agents' sessions); set `projectServerUp = false` to simulate it not running. */
  server: FakeOpencode;
  projectServerUp: boolean;
  /** This process's own server (hosts the leader's session). */
  local: FakeOpencode;
  tmux: FakeTmux;
  /** When set, ensureProjectServer() fails with `Failed to start OpenCode server: <this>`. */
  serverStartFailure: string | undefined;
  /** The credentials ensureProjectServer() hands out (ProjectServer.credentials). */
  serverCredentials: ServerCredentials | undefined;
  /** How many times ensureProjectServer() was called. */
  serverEnsureCalls: number;
  logs: { level: LogLevel; message: string }[];
  cleanup(): Promise<void>;
}

/** The edges of a process whose project server is down and whose tmux is fake: fixtures that only sweep or beat. */
export function offlineEdges(): TeamsEdges {
  return {
    projectServer: async () => undefined,
    localServer: new FakeOpencode(),
    tmux: new FakeTmux(),
    processes: hostProcesses,
    files: localFiles,
  };
}

/** A throwaway project with its own storage dir and a clock the test moves by hand. */
export async function makeTestContext(options: Partial<TeamsOptions> = {}): Promise<TestContext> {
  const projectRoot = await mkdtemp(path.join(tmpdir(), "oct-unit-"));
  const logs: TestContext["logs"] = [];
  const store = new TeamStore(new StoragePaths(resolveStorageRoot(projectRoot, {})));
  await store.init();
  const server = new FakeOpencode("http://127.0.0.1:28001");
  server.directory = projectRoot;
  const local = new FakeOpencode("http://127.0.0.1:4096");
  local.directory = projectRoot;
  const tmux = new FakeTmux();
  const ctx: TestContext = {
    projectRoot,
    store,
    clock: new ManualClock(),
    // No server boot in the background unless a test asks for one: it would race the test's own server calls.
    options: parseOptions({ background: false, prewarmServer: false, ...options }),
    log: (level, message) => logs.push({ level, message }),
    logs,
    server,
    local,
    tmux,
    projectServerUp: true,
    serverStartFailure: undefined,
    serverCredentials: undefined,
    serverEnsureCalls: 0,
    edges: {
      projectServer: async () => (ctx.projectServerUp ? server : undefined),
      ensureProjectServer: async () => {
        ctx.serverEnsureCalls++;
        if (ctx.serverStartFailure !== undefined) throw new ServerStartError(ctx.serverStartFailure);
        ctx.projectServerUp = true;
        const port = Number(new URL(server.baseUrl).port);
        return {
          api: server,
          url: server.baseUrl,
          info: {
            version: 1,
            projectPath: projectRoot,
            pid: process.pid,
            port,
            hostname: "127.0.0.1",
            startedAt: new Date(ctx.clock.now()).toISOString(),
            activeSessions: 0,
            logPath: store.paths.serverLog(projectRoot),
          },
          ...(ctx.serverCredentials ? { credentials: ctx.serverCredentials } : {}),
        };
      },
      opencodeBinary: () => "opencode",
      localServer: local,
      git: new GitCli(),
      tmux,
      // This host's own: unit tests start real processes where it matters, and fake panes' pids name none of theirs.
      processes: hostProcesses,
      files: localFiles,
    },
    // Fake panes start, settle and die at once; a test of real panes sets its own.
    paneTiming: { settleMs: 0, execSettleMs: 0, exitGraceMs: 0, tuiReadyMs: 0 },
    cleanup: async () => {
      // A spare worktree being made in the background would be writing into the directory removed here.
      await sparesSettled(ctx);
      await rm(projectRoot, { recursive: true, force: true });
    },
  };
  return ctx;
}

export function parseOutput<T = Record<string, unknown>>(result: unknown): T {
  if (typeof result === "string") return JSON.parse(result) as T;
  return JSON.parse((result as { output: string }).output) as T;
}

/**
 * The context the plugin builds (buildContext) for `projectRoot` with `options`, logging nothing; it has no local
 * server of its own: a call to one fails with `noLocalServer`.
 */
export function builtContext(
  projectRoot: string,
  options: Partial<TeamsOptions>,
  noLocalServer = "not used",
): TeamsContext {
  return buildContext({
    projectRoot,
    options: parseOptions(options),
    log: () => {},
    localServer: new UnavailableOpencodeApi(noLocalServer),
  });
}

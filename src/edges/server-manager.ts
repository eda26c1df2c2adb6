import { spawn } from "node:child_process";
import { closeSync, openSync, writeSync } from "node:fs";
import { mkdir, readFile, rename, stat } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { withFileLock } from "../state/lock.ts";
import { projectHash, type StoragePaths } from "../state/paths.ts";
import { type ServerInfo, ServerInfoSchema } from "../state/schemas.ts";
import { readJson, writeJson } from "../state/store.ts";
import type { OpencodeApi } from "./opencode-api.ts";
import { resolveOpencodeBinary } from "./opencode-binary.ts";
import { SdkOpencodeApi, serverAuthFromEnv } from "./opencode-client.ts";
import { processCommandLine, processRunning, terminateProcess } from "./process-info.ts";

export const PORT_FIRST = 28_000;
export const PORT_LAST = 28_999;
const HOSTNAME = "127.0.0.1";
/** A fresh server can leave an early request unanswered, so every probe has its own short timeout. */
const PROBE_TIMEOUT_MS = 500;
const LOG_TAIL_LINES = 15;
const LOG_ROTATE_BYTES = 5 * 1024 * 1024;
const START_ATTEMPTS = 3;

/** `Failed to start OpenCode server: <details>`, the seed's wording; details end with the server log's last lines. */
export class ServerStartError extends Error {
  override name = "ServerStartError";
  constructor(details: string) {
    super(`Failed to start OpenCode server: ${details}`);
  }
}

/** The project's running `opencode serve`. */
export interface ProjectServer {
  api: OpencodeApi;
  url: string;
  info: ServerInfo;
}

export interface ServerManagerConfig {
  projectRoot: string;
  paths: StoragePaths;
  /** How long a fresh server may take to answer its health check. */
  startTimeoutMs: number;
  /** Explicit `opencode` binary (plugin option); otherwise OPENCODE_TEAMS_OPENCODE_BIN, node_modules, PATH. */
  opencodeBin?: string;
  env?: NodeJS.ProcessEnv;
}

/** The port a project tries first: stable for a path, so a restarted server is found where it was. */
export function preferredPort(projectRoot: string): number {
  const span = PORT_LAST - PORT_FIRST + 1;
  return PORT_FIRST + (Number.parseInt(projectHash(projectRoot).slice(0, 8), 16) % span);
}

/** Ports to try, starting at the preferred one and wrapping around inside the range. */
export function candidatePorts(projectRoot: string, count = 40): number[] {
  const span = PORT_LAST - PORT_FIRST + 1;
  const first = preferredPort(projectRoot) - PORT_FIRST;
  return Array.from({ length: Math.min(count, span) }, (_, i) => PORT_FIRST + ((first + i) % span));
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host: HOSTNAME, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

type Health = "healthy" | "unauthorized" | "unhealthy";

function authHeaders(env: NodeJS.ProcessEnv): Record<string, string> {
  const { password, username } = serverAuthFromEnv(env);
  if (!password) return {};
  return {
    Authorization: `Basic ${Buffer.from(`${username ?? "opencode"}:${password}`).toString("base64")}`,
  };
}

async function probeHealth(
  url: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<Health> {
  try {
    const response = await fetch(`${url}/global/health`, {
      headers: authHeaders(env),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status === 401 || response.status === 403) return "unauthorized";
    if (!response.ok) return "unhealthy";
    const body = (await response.json()) as { healthy?: unknown };
    return body.healthy === true ? "healthy" : "unhealthy";
  } catch {
    return "unhealthy";
  }
}

async function probeHealthRepeatedly(
  url: string,
  env: NodeJS.ProcessEnv,
  attempts: number,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<Health> {
  let last: Health = "unhealthy";
  for (let i = 0; i < attempts; i++) {
    last = await probeHealth(url, env, timeoutMs);
    if (last !== "unhealthy") return last;
    if (i + 1 < attempts) await Bun.sleep(150);
  }
  return last;
}

async function logTail(file: string, fromByte: number): Promise<string> {
  try {
    const text = (await readFile(file)).subarray(fromByte).toString("utf8");
    const lines = text.split("\n").filter((line) => line.trim() !== "");
    return lines.slice(-LOG_TAIL_LINES).join("\n");
  } catch {
    return "";
  }
}

function serverEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  // The server outlives the terminal it was started from; a stale $TMUX would point the plugin inside it at that
  // terminal's tmux session.
  delete out.TMUX;
  delete out.TMUX_PANE;
  return out;
}

/**
 * One `opencode serve` per project, on 127.0.0.1, started detached in the project root (so it loads the project's
 * OpenCode config and with it this plugin) and recorded in ServerInfo for every process of the project to find.
 */
export class ServerManager {
  private readonly env: NodeJS.ProcessEnv;
  private cached: { key: string; api: OpencodeApi } | undefined;

  constructor(private readonly config: ServerManagerConfig) {
    this.env = config.env ?? process.env;
  }

  get infoPath(): string {
    return this.config.paths.serverInfo(this.config.projectRoot);
  }

  get logPath(): string {
    return this.config.paths.serverLog(this.config.projectRoot);
  }

  /** Which `opencode` runs the server and the agents' panes. */
  opencodeBinary(): string {
    if (this.config.opencodeBin) return this.config.opencodeBin;
    const found = resolveOpencodeBinary(this.config.projectRoot, this.env);
    // Inside OpenCode the plugin runs in the opencode binary itself: the best guess when nothing else is found.
    if (found === "opencode" && /^opencode/.test(path.basename(process.execPath))) return process.execPath;
    return found;
  }

  private wrap(info: ServerInfo): ProjectServer {
    const url = `http://${info.hostname}:${info.port}`;
    const key = `${url} ${info.pid}`;
    if (this.cached?.key !== key) {
      this.cached = {
        key,
        api: new SdkOpencodeApi(url, { directory: this.config.projectRoot, ...serverAuthFromEnv(this.env) }),
      };
    }
    return { api: this.cached.api, url, info };
  }

  private async readInfo(): Promise<ServerInfo | undefined> {
    const read = await readJson(this.infoPath, ServerInfoSchema);
    return read.kind === "ok" ? read.value : undefined;
  }

  /** The recorded server when its process is still there; never starts one. */
  async current(): Promise<ProjectServer | undefined> {
    const info = await this.readInfo();
    return info && processRunning(info.pid) ? this.wrap(info) : undefined;
  }

  /** Reuse the project's live server, or start one and wait until it is healthy. Throws ServerStartError. */
  async ensureRunning(): Promise<ProjectServer> {
    const live = await this.reusable(await this.readInfo(), 3);
    if (live) return live;
    return withFileLock(
      path.join(this.config.paths.serverDir(this.config.projectRoot), "start"),
      async () => {
        // Whoever held the lock before us may have started it.
        const info = await this.readInfo();
        const again = await this.reusable(info, 3);
        if (again) return again;
        if (info) await this.retireWedged(info);
        return this.start();
      },
      { maxWaitMs: this.config.startTimeoutMs + 15_000 },
    );
  }

  private async reusable(info: ServerInfo | undefined, attempts: number): Promise<ProjectServer | undefined> {
    if (!info || !processRunning(info.pid)) return undefined;
    const url = `http://${info.hostname}:${info.port}`;
    const health = await probeHealthRepeatedly(url, this.env, attempts);
    if (health === "unauthorized") {
      throw new ServerStartError(
        `the project's server at ${url} (pid ${info.pid}) refuses our credentials; set OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME) to the ones it was started with`,
      );
    }
    return health === "healthy" ? this.wrap(info) : undefined;
  }

  /**
   * A recorded server whose process lives but does not answer: give it a few long probes, then stop it, but only when
   * the pid still runs `opencode ... serve` on the recorded port (a reused pid belongs to someone else).
   */
  private async retireWedged(info: ServerInfo): Promise<void> {
    if (!processRunning(info.pid)) return;
    const argv = await processCommandLine(info.pid);
    const ours = argv?.includes("serve") && argv.includes(String(info.port));
    if (!ours) return;
    const url = `http://${info.hostname}:${info.port}`;
    if ((await probeHealthRepeatedly(url, this.env, 3, 2_000)) !== "unhealthy") return;
    await terminateProcess(info.pid, 3_000);
  }

  private async rotateLog(): Promise<void> {
    try {
      if ((await stat(this.logPath)).size > LOG_ROTATE_BYTES) await rename(this.logPath, `${this.logPath}.1`);
    } catch {
      // no log yet
    }
  }

  private async start(): Promise<ProjectServer> {
    await mkdir(path.dirname(this.logPath), { recursive: true });
    await this.rotateLog();
    const binary = this.opencodeBinary();
    const tried = new Set<number>();
    let lastError: ServerStartError | undefined;
    for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
      let port: number | undefined;
      for (const candidate of candidatePorts(this.config.projectRoot)) {
        if (tried.has(candidate)) continue;
        if (await portFree(candidate)) {
          port = candidate;
          break;
        }
        tried.add(candidate);
      }
      if (port === undefined) {
        throw new ServerStartError(
          `no free port near ${preferredPort(this.config.projectRoot)} in ${PORT_FIRST}-${PORT_LAST}`,
        );
      }
      tried.add(port);
      const outcome = await this.startOn(binary, port);
      if (outcome.kind === "started") return outcome.server;
      lastError = outcome.error;
      // Someone took the port between our probe and the server's bind: try the next one.
      if (!outcome.portTaken) break;
    }
    throw lastError ?? new ServerStartError("unknown failure");
  }

  private async startOn(
    binary: string,
    port: number,
  ): Promise<
    | { kind: "started"; server: ProjectServer }
    | { kind: "failed"; error: ServerStartError; portTaken: boolean }
  > {
    const url = `http://${HOSTNAME}:${port}`;
    const fd = openSync(this.logPath, "a");
    writeSync(fd, `\n=== opencode-teams: ${binary} serve on ${url} at ${new Date().toISOString()} ===\n`);
    const markerEnd = (await stat(this.logPath)).size;
    const failed = async (why: string) => {
      const tail = await logTail(this.logPath, markerEnd);
      const portTaken = /EADDRINUSE|address already in use|port .* in use/i.test(tail);
      const details = `${why} (log: ${this.logPath})${tail ? `:\n${tail}` : ""}`;
      return { kind: "failed" as const, error: new ServerStartError(details), portTaken };
    };

    let spawnError: Error | undefined;
    let exitCode: number | null | undefined;
    let exitSignal: NodeJS.Signals | null = null;
    let child: ReturnType<typeof spawn>;
    try {
      // Detached: the server is a session leader of its own and outlives the process that started it.
      child = spawn(
        binary,
        ["serve", "--hostname", HOSTNAME, "--port", String(port), "--print-logs", "--log-level", "INFO"],
        { cwd: this.config.projectRoot, env: serverEnv(this.env), stdio: ["ignore", fd, fd], detached: true },
      );
    } catch (error) {
      closeSync(fd);
      return failed(`cannot run ${binary}: ${error instanceof Error ? error.message : String(error)}`);
    }
    closeSync(fd);
    child.on("error", (error) => {
      spawnError = error;
    });
    child.on("exit", (code, signal) => {
      exitCode = code;
      exitSignal = signal;
    });
    child.unref();

    const deadline = Date.now() + this.config.startTimeoutMs;
    for (;;) {
      if (spawnError) return failed(`cannot run ${binary}: ${spawnError.message}`);
      if (exitCode !== undefined) {
        const how = exitSignal ? `was killed by ${exitSignal}` : `exited with code ${exitCode}`;
        return failed(`${binary} serve ${how} before it answered ${url}/global/health`);
      }
      if (child.pid !== undefined && (await probeHealth(url, this.env)) === "healthy") break;
      if (Date.now() >= deadline) {
        if (child.pid !== undefined) await terminateProcess(child.pid, 2_000);
        return failed(
          `${binary} serve did not answer ${url}/global/health within ${this.config.startTimeoutMs} ms`,
        );
      }
      await Bun.sleep(100);
    }
    const pid = child.pid as number;
    const info: ServerInfo = {
      version: 1,
      projectPath: this.config.projectRoot,
      pid,
      port,
      hostname: HOSTNAME,
      startedAt: new Date().toISOString(),
      activeSessions: 0,
      logPath: this.logPath,
    };
    await writeJson(this.infoPath, ServerInfoSchema, info);
    return { kind: "started", server: this.wrap(info) };
  }
}

import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, fchmodSync, openSync, writeSync } from "node:fs";
import { appendFile, chmod, mkdir, readFile, rename, stat } from "node:fs/promises";
import path from "node:path";
import { withFileLock } from "../state/lock.ts";
import type { StoragePaths } from "../state/paths.ts";
import type { ServerAuth, ServerInfo } from "../state/schemas.ts";
import { ServerInfoStore } from "../state/server-info-store.ts";
import type { OpencodeApi } from "./opencode-api.ts";
import { resolveOpencodeBinary } from "./opencode-binary.ts";
import { SdkOpencodeApi } from "./opencode-client.ts";
import { processRunning, terminateProcess } from "./process-info.ts";
import {
  AUTH_SOURCE_ENV,
  newServerAuth,
  PROBE_TIMEOUT_MS,
  probeHealth,
  probeHealthRepeatedly,
  recordedCredentials,
  type ServerCredentials,
} from "./server-auth.ts";
import { carriesMarkers, markedEnvironment, projectMarkers, serverEnv } from "./server-env.ts";
import {
  checkListener,
  type ListenerCheck,
  listeningSockets,
  processStartTicks,
  socketOwners,
} from "./server-identity.ts";
import {
  candidatePorts,
  HOSTNAME,
  PORT_FIRST,
  PORT_LAST,
  portFree,
  preferredPort,
  urlOf,
} from "./server-ports.ts";

/** A server that is alive but slow gets long probes: a busy 2-core machine can take seconds to answer. */
const UNRESPONSIVE_PROBE_MS = 2_000;
const LOG_TAIL_LINES = 15;
const LOG_ROTATE_BYTES = 5 * 1024 * 1024;
const START_ATTEMPTS = 3;
/**
 * How long a healthy answer from a server verified ours is taken as still true by this process. A busy server (agents'
 * panes booting on a small machine) can take seconds to answer a health check that tells nothing new; identity (pid,
 * start time, listening sockets) is still checked on every call, so a server that died or let its port go is not
 * trusted, and one that hangs fails the spawn's own requests with their own errors.
 */
const HEALTH_TRUST_MS = 120_000;

/** `Failed to start OpenCode server: <details>` (specs/spawn-agent.md); details end with the server log's last lines. */
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
  /** What the agents' panes (`opencode attach`) need to get in; absent for a server without a password. */
  credentials?: ServerCredentials;
}

export interface ServerManagerConfig {
  projectRoot: string;
  paths: StoragePaths;
  /** How long a fresh server may take to answer its health check. */
  startTimeoutMs: number;
  /** Explicit `opencode` binary (plugin option); otherwise OPENCODE_TEAMS_OPENCODE_BIN, node_modules, PATH. */
  opencodeBin?: string;
  env?: NodeJS.ProcessEnv;
  /** Where decisions about the server are logged besides the server log (the plugin's logger). */
  log?: (level: "info" | "warn", message: string) => void;
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

/** What became of a spawned child, filled in as it happens. */
interface ChildFate {
  /** `<message>` when it could not be run at all. */
  error?: string;
  /** `exited with code <n>` / `was killed by <signal>`. */
  exit?: string;
}

function watchChild(child: ChildProcess): ChildFate {
  const fate: ChildFate = {};
  child.on("error", (error) => {
    fate.error = error.message;
  });
  child.on("exit", (code, signal) => {
    fate.exit = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  });
  return fate;
}

/** What ServerManager makes of a recorded server. */
type Inspection =
  | { kind: "healthy"; server: ProjectServer }
  | { kind: "unauthorized"; info: ServerInfo }
  /** Ours and alive, but it does not answer (or does not listen yet): never replaced behind its back. */
  | { kind: "unresponsive"; info: ServerInfo; why: string }
  /** Ours, but started without a password (by an older version): an open door. */
  | { kind: "open"; info: ServerInfo }
  /** Nothing of ours there: no record, the process is gone, or the pid or port belongs to someone else. */
  | { kind: "absent"; check?: ServerCheck };

/**
 * checkListener's answer, plus "other-project": our serve command and socket, but not this project's markers (another
 * project's server on a recorded pid or port after a reboot, or one started by hand or by an older version). Such a
 * server is never sent our password nor signalled; it is left running and ours is started on another port.
 */
type ServerCheck = ListenerCheck | "other-project";

/** ServerInfo as it may leave the process: the password never does (specs/spawn-agent.md). */
export type PublicServerInfo = Omit<ServerInfo, "auth"> & {
  auth?: { source: ServerAuth["source"]; username: string };
};

function publicInfo(info: ServerInfo): PublicServerInfo {
  const { auth, ...rest } = info;
  return auth ? { ...rest, auth: { source: auth.source, username: auth.username } } : rest;
}

export type ServerState = "running" | "unresponsive" | "unauthorized" | "unprotected" | "stopped" | "none";

/** The project server as `opencode-teams server status` and get-agent-status report it. */
export interface ServerReport {
  state: ServerState;
  /** The recorded (or found) server, without its password; absent with state "none". */
  info?: PublicServerInfo;
  detail: string;
}

/** Servers this process started: the plugin stops only those on dispose. */
const startedHere = new Set<number>();

/**
 * One `opencode serve` per project, on 127.0.0.1, protected by a password, started detached in the project root (so it
 * loads the project's OpenCode config and with it this plugin) and recorded in ServerInfo for every process of the
 * project to find. A recorded server is only used once its pid, command line and listening socket prove it ours.
 */
export class ServerManager {
  private readonly env: NodeJS.ProcessEnv;
  private readonly markers: Record<string, string>;
  private cached: { key: string; api: OpencodeApi } | undefined;
  /**
   * pid, port, start time and listening sockets of the last server that passed checkListener: current() is called on
   * every sweep.
   */
  private verifiedKey: string | undefined;
  private readonly infoStore: ServerInfoStore;
  /** verifiedKey and credentials of the server that last answered healthy here, and when. */
  private healthy: { key: string; at: number } | undefined;

  constructor(private readonly config: ServerManagerConfig) {
    this.env = config.env ?? process.env;
    this.markers = projectMarkers(config.projectRoot, config.paths.root);
    this.infoStore = new ServerInfoStore(config.paths);
  }

  get logPath(): string {
    return this.config.paths.serverLog(this.config.projectRoot);
  }

  private get serverDir(): string {
    return this.config.paths.serverDir(this.config.projectRoot);
  }

  /** Which `opencode` runs the server and the agents' panes. */
  opencodeBinary(): string {
    if (this.config.opencodeBin) return this.config.opencodeBin;
    const found = resolveOpencodeBinary(this.config.projectRoot, this.env);
    // Inside OpenCode the plugin runs in the opencode binary itself: the best guess when nothing else is found.
    if (found === "opencode" && /^opencode/.test(path.basename(process.execPath))) return process.execPath;
    return found;
  }

  credentialsOf(info: ServerInfo): ServerCredentials | undefined {
    return recordedCredentials(info, this.env);
  }

  private wrap(info: ServerInfo): ProjectServer {
    const url = urlOf(info.port);
    const credentials = this.credentialsOf(info);
    const key = `${url} ${info.pid} ${credentials?.username}:${credentials?.password}`;
    if (this.cached?.key !== key) {
      this.cached = {
        key,
        api: new SdkOpencodeApi(url, { directory: this.config.projectRoot, ...credentials }),
      };
    }
    return { api: this.cached.api, url, info, ...(credentials ? { credentials } : {}) };
  }

  private async readInfo(): Promise<ServerInfo | undefined> {
    const read = await this.infoStore.read(this.config.projectRoot);
    // Said once: the damaged file is moved aside, and the next read finds none.
    if (read.kind === "corrupt")
      await this.note("warn", `${read.warning}; looking for our server by its ports`);
    return read.kind === "ok" ? read.value : undefined;
  }

  /** server.json holds the password: 0600 in a 0700 directory, whatever the umask or an older version left. */
  private async ensureServerDir(): Promise<void> {
    await mkdir(this.serverDir, { recursive: true, mode: 0o700 });
    await chmod(this.serverDir, 0o700);
  }

  /** Under server.json's own lock (ServerInfoStore), the one recountActiveSessions updates it under. */
  private async writeInfo(info: ServerInfo): Promise<void> {
    await this.ensureServerDir();
    await this.infoStore.write(this.config.projectRoot, info);
  }

  private async removeInfo(): Promise<void> {
    await this.infoStore.remove(this.config.projectRoot);
  }

  /** A line in the server log (never a password): what was decided about the server, and why. */
  private async note(level: "info" | "warn", message: string): Promise<void> {
    this.config.log?.(level, message);
    await this.ensureServerDir()
      .then(() =>
        appendFile(this.logPath, `=== opencode-teams ${new Date().toISOString()}: ${message} ===\n`, {
          mode: 0o600,
        }),
      )
      .catch(() => {});
  }

  /** checkListener, and then this project's markers in the process's environment: nothing is sent, nothing signalled. */
  private async verify(info: ServerInfo): Promise<ServerCheck> {
    // The listening sockets are part of the key: a server of ours that let its port go must not vouch for whoever
    // took the port next. /proc/net/tcp is one read; the full check walks every fd of the process.
    const [ticks, listeners] = await Promise.all([processStartTicks(info.pid), listeningSockets()]);
    const sockets = (listeners?.get(info.port) ?? []).sort().join(",");
    const key = `${info.pid}:${info.port}:${ticks}:${sockets}`;
    if (ticks !== undefined && key === this.verifiedKey && processRunning(info.pid)) return "ours";
    let check: ServerCheck = await checkListener(info.pid, HOSTNAME, info.port);
    if ((check === "ours" || check === "not-listening") && !(await carriesMarkers(info.pid, this.markers))) {
      check = "other-project";
    }
    this.verifiedKey = check === "ours" && ticks !== undefined ? key : undefined;
    return check;
  }

  /**
   * SIGTERM then SIGKILL to a server verified ours, asking again right before each signal that the pid is still the
   * same process (its start time) with this project's markers: a pid that changed hands meanwhile is never signalled.
   */
  private async terminateServer(pid: number): Promise<boolean> {
    const ticks = await processStartTicks(pid);
    return terminateProcess(
      pid,
      5_000,
      async () => (await processStartTicks(pid)) === ticks && (await carriesMarkers(pid, this.markers)),
    );
  }

  /**
   * Identity first (pid, command line, listening socket: nothing is sent), then health with our credentials. The
   * host is always 127.0.0.1, whatever the file says.
   */
  private async inspect(
    info: ServerInfo | undefined,
    attempts: number,
    timeoutMs = PROBE_TIMEOUT_MS,
  ): Promise<Inspection> {
    if (!info) return { kind: "absent" };
    const check = await this.verify(info);
    if (check === "not-listening") {
      return { kind: "unresponsive", info, why: `it does not listen on port ${info.port}` };
    }
    if (check !== "ours") return { kind: "absent", check };
    const credentials = this.credentialsOf(info);
    // Protected by the user's password, which this process was not given: as good as a wrong one.
    if (!credentials) return info.auth ? { kind: "unauthorized", info } : { kind: "open", info };
    const trustKey =
      this.verifiedKey && `${this.verifiedKey} ${credentials.username}:${credentials.password}`;
    // A monotonic clock: a wall clock stepped back would stretch the trust.
    if (trustKey && this.healthy?.key === trustKey && performance.now() - this.healthy.at < HEALTH_TRUST_MS) {
      return { kind: "healthy", server: this.wrap(info) };
    }
    const health = await probeHealthRepeatedly(urlOf(info.port), credentials, attempts, timeoutMs);
    this.healthy = health === "healthy" && trustKey ? { key: trustKey, at: performance.now() } : undefined;
    if (health === "healthy") return { kind: "healthy", server: this.wrap(info) };
    if (health === "unauthorized") return { kind: "unauthorized", info };
    return { kind: "unresponsive", info, why: "its health check does not answer" };
  }

  private refused(info: ServerInfo): ServerStartError {
    return new ServerStartError(
      `the project's server at ${urlOf(info.port)} (pid ${info.pid}) refuses our credentials; set OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME) to the ones it was started with, or stop it with \`opencode-teams server stop\``,
    );
  }

  /**
   * A request to the server failed: the next ensureRunning probes its health again instead of trusting the last
   * answer, so a server that hangs meets the "unresponsive" path rather than another timed-out request.
   */
  forgetHealthy(): void {
    this.healthy = undefined;
  }

  /** The recorded server when it is verified ours; never starts one and sends nothing to it. */
  async current(): Promise<ProjectServer | undefined> {
    const info = await this.readInfo();
    return info && (await this.verify(info)) === "ours" ? this.wrap(info) : undefined;
  }

  /** Reuse the project's server, or start one and wait until it is healthy. Throws ServerStartError. */
  async ensureRunning(): Promise<ProjectServer> {
    const first = await this.inspect(await this.readInfo(), 3);
    if (first.kind === "healthy") return first.server;
    if (first.kind === "unauthorized") throw this.refused(first.info);
    await this.ensureServerDir();
    return withFileLock(
      path.join(this.serverDir, "start"),
      async () => {
        // Whoever held the lock before us may have started it.
        const info = await this.readInfo();
        const seen = await this.inspect(info, 3);
        switch (seen.kind) {
          case "healthy":
            return seen.server;
          case "unauthorized":
            throw this.refused(seen.info);
          case "unresponsive":
            return this.awaitUnresponsive(seen.info, seen.why);
          case "open":
            await this.note(
              "warn",
              `the project's server (pid ${seen.info.pid}) has no password (started by an older opencode-teams); stopping it and starting a protected one`,
            );
            await this.terminateServer(seen.info.pid);
            return this.start();
          case "absent":
            if (info && seen.check) {
              await this.note(
                "warn",
                `recorded server pid ${info.pid} port ${info.port} not used: ${seen.check}`,
              );
            }
            return (await this.adoptOrphan()) ?? this.start();
        }
      },
      { maxWaitMs: 2 * this.config.startTimeoutMs + 15_000 },
    );
  }

  /**
   * Our server, alive, but not answering: a busy machine or a long request, not a reason to kill the agents that use
   * it. Wait up to `startTimeoutMs` more, then give up without touching it.
   */
  private async awaitUnresponsive(info: ServerInfo, why: string): Promise<ProjectServer> {
    const waitMs = this.config.startTimeoutMs;
    await this.note(
      "warn",
      `the project's server (pid ${info.pid}) is alive but ${why}; waiting up to ${waitMs} ms`,
    );
    const deadline = Date.now() + waitMs;
    for (;;) {
      const seen = await this.inspect(info, 1, UNRESPONSIVE_PROBE_MS);
      if (seen.kind === "healthy") return seen.server;
      if (seen.kind === "unauthorized") throw this.refused(info);
      // It exited meanwhile: nothing of ours is left to wait for.
      if (seen.kind === "absent") return this.start();
      if (Date.now() >= deadline) {
        await this.note("warn", `the project's server (pid ${info.pid}) still unresponsive; left running`);
        throw new ServerStartError(
          `the project's server (pid ${info.pid}, ${urlOf(info.port)}) is alive but ${why} after ${waitMs} ms; it is left running because agents may be using it. See ${this.logPath}; if it stays so, stop it with \`opencode-teams server stop\` and spawn again`,
        );
      }
      await Bun.sleep(500);
    }
  }

  /**
   * Our server when server.json is lost or damaged: a listener on one of the project's ports whose process runs our
   * serve command and carries this project's root and storage in its environment (a server the user started by hand
   * does not, and is never touched).
   */
  private async findOrphan(): Promise<
    { pid: number; port: number; env: Record<string, string> } | undefined
  > {
    const listeners = await listeningSockets();
    if (!listeners) return undefined;
    for (const port of candidatePorts(this.config.projectRoot)) {
      const inodes = listeners.get(port);
      if (!inodes) continue;
      for (const pid of await socketOwners(inodes)) {
        if ((await checkListener(pid, HOSTNAME, port)) !== "ours") continue;
        const env = await markedEnvironment(pid, this.markers);
        if (env) return { pid, port, env };
      }
    }
    return undefined;
  }

  /**
   * Take back our server whose record was lost. Its password lives on in its own environment (readable by this user
   * only, like server.json): reading it there keeps the agents that use the server running. If it cannot be read,
   * nobody can use that server any more; it is stopped (it is verified ours) and a fresh one started.
   */
  private async adoptOrphan(): Promise<ProjectServer | undefined> {
    const orphan = await this.findOrphan();
    if (!orphan) return undefined;
    const password = orphan.env.OPENCODE_SERVER_PASSWORD;
    const username = orphan.env.OPENCODE_SERVER_USERNAME || "opencode";
    if (password) {
      const info: ServerInfo = {
        version: 1,
        projectPath: this.config.projectRoot,
        pid: orphan.pid,
        port: orphan.port,
        hostname: HOSTNAME,
        startedAt: new Date().toISOString(),
        activeSessions: 0,
        logPath: this.logPath,
        // The user's own password stays unwritten, as when the server was started.
        auth:
          orphan.env[AUTH_SOURCE_ENV] === "environment"
            ? { source: "environment", username }
            : { source: "generated", username, password },
      };
      const health = await probeHealthRepeatedly(urlOf(orphan.port), { username, password }, 3);
      if (health !== "unauthorized") {
        await this.writeInfo(info);
        await this.note(
          "warn",
          `server.json was missing or damaged; recorded our running server pid ${orphan.pid} again`,
        );
        return health === "healthy"
          ? this.wrap(info)
          : this.awaitUnresponsive(info, "its health check does not answer");
      }
    }
    await this.note(
      "warn",
      `our server pid ${orphan.pid} lost its record and its password cannot be recovered; stopping it and starting a fresh one`,
    );
    await this.terminateServer(orphan.pid);
    return undefined;
  }

  /** For `opencode-teams server status` and get-agent-status: what runs, checked without starting anything. */
  async report(): Promise<ServerReport> {
    const recorded = await this.readInfo();
    if (!recorded) {
      const orphan = await this.findOrphan();
      return orphan
        ? {
            state: "unresponsive",
            detail: `no server.json, but our server pid ${orphan.pid} listens on ${urlOf(orphan.port)}; the next spawn-agent records it again`,
          }
        : {
            state: "none",
            detail: "no OpenCode server recorded for this project; the first spawn-agent starts one",
          };
    }
    const seen = await this.inspect(recorded, 1, UNRESPONSIVE_PROBE_MS);
    const info = publicInfo(recorded);
    const where = `${urlOf(info.port)} (pid ${info.pid})`;
    switch (seen.kind) {
      case "healthy":
        return { state: "running", info, detail: `${where} is healthy` };
      case "unauthorized":
        return { state: "unauthorized", info, detail: `${where} refuses our credentials` };
      case "unresponsive":
        return {
          state: "unresponsive",
          info,
          detail: `${where} is alive but ${seen.why}; see ${this.logPath}`,
        };
      case "open":
        return {
          state: "unprotected",
          info,
          detail: `${where} runs without a password; the next spawn-agent replaces it`,
        };
      case "absent":
        return { state: "stopped", info, detail: `${where} is not running (${seen.check ?? "gone"})` };
    }
  }

  /**
   * Stop the project's server: the recorded one, or our orphan, and only a pid verified ours. server.json goes with
   * it. Serialised with starts, so a concurrent spawn does not reuse a server being stopped. `stillIdle`, when given,
   * is asked under that lock right before the signal; a no leaves the server running.
   */
  async stop(
    reason: string,
    stillIdle?: () => Promise<boolean>,
  ): Promise<{ stopped: boolean; detail: string }> {
    await this.ensureServerDir();
    return withFileLock(
      path.join(this.serverDir, "start"),
      async () => {
        const info = await this.readInfo();
        let target: { pid: number; port: number } | undefined;
        if (info) {
          const check = await this.verify(info);
          // One that stopped listening (wedged, half shut down) is still ours to stop: verify saw our markers.
          if (check === "ours" || check === "not-listening") target = info;
        }
        target ??= await this.findOrphan();
        if (!target) {
          // The record names nothing of ours that runs (verified above): nothing is orphaned by removing it.
          if (info) await this.removeInfo();
          return { stopped: false, detail: "no server of this project is running" };
        }
        // Asked under the start lock, right before the signal: a spawn that came in meanwhile keeps its server.
        if (stillIdle && !(await stillIdle())) {
          return {
            stopped: false,
            detail: `pid ${target.pid} left running: an agent of the project runs on it`,
          };
        }
        await this.note("info", `stopping the project's server pid ${target.pid}: ${reason}`);
        if (!(await this.terminateServer(target.pid))) {
          return {
            stopped: false,
            detail: `pid ${target.pid} survived SIGKILL or changed hands; server.json is kept`,
          };
        }
        startedHere.delete(target.pid);
        await this.removeInfo();
        return { stopped: true, detail: `stopped ${urlOf(target.port)} (pid ${target.pid})` };
      },
      { maxWaitMs: 2 * this.config.startTimeoutMs + 15_000 },
    );
  }

  /** Whether the recorded server is one this process started (the plugin's dispose only stops those). */
  async startedByThisProcess(): Promise<boolean> {
    const info = await this.readInfo();
    return info !== undefined && startedHere.has(info.pid);
  }

  private async rotateLog(): Promise<void> {
    try {
      if ((await stat(this.logPath)).size > LOG_ROTATE_BYTES) await rename(this.logPath, `${this.logPath}.1`);
    } catch {
      // no log yet
    }
  }

  private async start(): Promise<ProjectServer> {
    await this.ensureServerDir();
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

  /** Poll a fresh server until it is healthy; what went wrong otherwise (the child is stopped on a timeout). */
  private async awaitHealthy(
    binary: string,
    child: ChildProcess,
    fate: ChildFate,
    port: number,
    credentials: ServerCredentials,
  ): Promise<string | undefined> {
    const url = urlOf(port);
    const deadline = Date.now() + this.config.startTimeoutMs;
    for (;;) {
      if (fate.error) return `cannot run ${binary}: ${fate.error}`;
      if (fate.exit) return `${binary} serve ${fate.exit} before it answered ${url}/global/health`;
      // Our own child, but the port may be someone else's until our child holds it: check before sending the password.
      if (
        child.pid !== undefined &&
        (await checkListener(child.pid, HOSTNAME, port)) === "ours" &&
        (await probeHealth(url, credentials)) === "healthy"
      ) {
        return undefined;
      }
      if (Date.now() >= deadline) {
        if (child.pid !== undefined) await terminateProcess(child.pid, 2_000);
        return `${binary} serve did not answer ${url}/global/health within ${this.config.startTimeoutMs} ms`;
      }
      await Bun.sleep(100);
    }
  }

  private async startOn(
    binary: string,
    port: number,
  ): Promise<
    | { kind: "started"; server: ProjectServer }
    | { kind: "failed"; error: ServerStartError; portTaken: boolean }
  > {
    const url = urlOf(port);
    const fd = openSync(this.logPath, "a", 0o600);
    fchmodSync(fd, 0o600);
    writeSync(fd, `\n=== opencode-teams: ${binary} serve on ${url} at ${new Date().toISOString()} ===\n`);
    const markerEnd = (await stat(this.logPath)).size;
    const failed = async (why: string) => {
      const tail = await logTail(this.logPath, markerEnd);
      const portTaken = /EADDRINUSE|address already in use|port .* in use/i.test(tail);
      const details = `${why} (log: ${this.logPath})${tail ? `:\n${tail}` : ""}`;
      return { kind: "failed" as const, error: new ServerStartError(details), portTaken };
    };

    const { auth, credentials } = newServerAuth(this.env);
    let child: ChildProcess;
    try {
      // Detached: the server is a session leader of its own and outlives the process that started it. The password
      // goes through its environment, never argv (which every user of the machine can read).
      child = spawn(
        binary,
        ["serve", "--hostname", HOSTNAME, "--port", String(port), "--print-logs", "--log-level", "INFO"],
        {
          cwd: this.config.projectRoot,
          env: serverEnv(this.env, auth, credentials, this.markers),
          stdio: ["ignore", fd, fd],
          detached: true,
        },
      );
    } catch (error) {
      closeSync(fd);
      return failed(`cannot run ${binary}: ${error instanceof Error ? error.message : String(error)}`);
    }
    closeSync(fd);
    const fate = watchChild(child);
    child.unref();
    const problem = await this.awaitHealthy(binary, child, fate, port, credentials);
    if (problem) return failed(problem);
    const pid = child.pid as number;
    startedHere.add(pid);
    const info: ServerInfo = {
      version: 1,
      projectPath: this.config.projectRoot,
      pid,
      port,
      hostname: HOSTNAME,
      startedAt: new Date().toISOString(),
      activeSessions: 0,
      logPath: this.logPath,
      auth,
    };
    await this.writeInfo(info);
    return { kind: "started", server: this.wrap(info) };
  }
}

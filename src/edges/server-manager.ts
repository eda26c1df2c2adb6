// The project's one `opencode serve` as the rest of the plugin sees it: reused when it is verified ours and healthy,
// started when there is none, waited for when it is slow, and stopped only when it is proven ours.
import path from "node:path";
import type { StoragePaths } from "../state/paths.ts";
import type { ServerInfo } from "../state/schemas.ts";
import type { OpencodeApi } from "./opencode-api.ts";
import { resolveOpencodeBinary } from "./opencode-binary.ts";
import { SdkOpencodeApi } from "./opencode-client.ts";
import { recordedCredentials, type ServerCredentials } from "./server-auth.ts";
import { projectMarkers } from "./server-env.ts";
import { ServerFiles, type ServerLog } from "./server-files.ts";
import { ServerInspector, UNRESPONSIVE_PROBE_MS } from "./server-inspection.ts";
import { adoptOrphan, findOrphan } from "./server-orphan.ts";
import { urlOf } from "./server-ports.ts";
import { recordedReport, type ServerReport, unrecordedReport } from "./server-report.ts";
import { startServer } from "./server-start.ts";

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

/**
 * What a start may add: asked only when this call starts the server (never for one that runs or is adopted), right
 * before the start. The prewarm's warm-up provider (specs/spawn-agent.md, "The cold path").
 */
export interface StartExtras {
  /**
   * OPENCODE_CONFIG_CONTENT for the new server, given the environment's own (`undefined` when unset), which it must
   * keep; undefined leaves the environment's own. A rejection counts as undefined.
   */
  configContent(userContent: string | undefined): Promise<string | undefined>;
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
  log?: ServerLog;
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
  private readonly files: ServerFiles;
  private readonly inspector: ServerInspector;
  private cached: { key: string; api: OpencodeApi } | undefined;

  constructor(private readonly config: ServerManagerConfig) {
    this.env = config.env ?? process.env;
    this.markers = projectMarkers(config.projectRoot, config.paths.root);
    this.files = new ServerFiles(config.paths, config.projectRoot, config.log);
    this.inspector = new ServerInspector(this.markers, this.env);
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
    const url = urlOf(info.port);
    const credentials = recordedCredentials(info, this.env);
    const key = `${url} ${info.pid} ${credentials?.username}:${credentials?.password}`;
    if (this.cached?.key !== key) {
      this.cached = {
        key,
        api: new SdkOpencodeApi(url, { directory: this.config.projectRoot, ...credentials }),
      };
    }
    return { api: this.cached.api, url, info, ...(credentials ? { credentials } : {}) };
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
    this.inspector.forgetHealthy();
  }

  /** The recorded server when it is verified ours; never starts one and sends nothing to it. */
  async current(): Promise<ProjectServer | undefined> {
    const info = await this.files.read();
    return info && (await this.inspector.verify(info)) === "ours" ? this.wrap(info) : undefined;
  }

  /** Reuse the project's server, or start one and wait until it is healthy. Throws ServerStartError. */
  async ensureRunning(extras?: StartExtras): Promise<ProjectServer> {
    const first = await this.inspector.inspect(await this.files.read(), 3);
    if (first.kind === "healthy") return this.wrap(first.info);
    if (first.kind === "unauthorized") throw this.refused(first.info);
    return this.files.underStartLock(async () => {
      // Whoever held the lock before us may have started it.
      const info = await this.files.read();
      const seen = await this.inspector.inspect(info, 3);
      switch (seen.kind) {
        case "healthy":
          return this.wrap(seen.info);
        case "unauthorized":
          throw this.refused(seen.info);
        case "unresponsive":
          return this.awaitUnresponsive(seen.info, seen.why, extras);
        case "open":
          await this.files.note(
            "warn",
            `the project's server (pid ${seen.info.pid}) has no password (started by an older opencode-teams); stopping it and starting a protected one`,
          );
          await this.inspector.terminate(seen.info.pid);
          return this.start(extras);
        case "absent":
          if (info && seen.check) {
            await this.files.note(
              "warn",
              `recorded server pid ${info.pid} port ${info.port} not used: ${seen.check}`,
            );
          }
          return this.adoptOrStart(extras);
      }
    }, this.startLockWaitMs);
  }

  /** Both starting and stopping may wait for a start in progress to time out. */
  private get startLockWaitMs(): number {
    return 2 * this.config.startTimeoutMs + 15_000;
  }

  private async adoptOrStart(extras: StartExtras | undefined): Promise<ProjectServer> {
    const adopted = await adoptOrphan(this.config.projectRoot, this.markers, this.files, this.inspector);
    if (!adopted) return this.start(extras);
    return adopted.healthy
      ? this.wrap(adopted.info)
      : this.awaitUnresponsive(adopted.info, "its health check does not answer", extras);
  }

  /**
   * Our server, alive, but not answering: a busy machine or a long request, not a reason to kill the agents that use
   * it. Wait up to `startTimeoutMs` more, then give up without touching it.
   */
  private async awaitUnresponsive(
    info: ServerInfo,
    why: string,
    extras: StartExtras | undefined,
  ): Promise<ProjectServer> {
    const waitMs = this.config.startTimeoutMs;
    await this.files.note(
      "warn",
      `the project's server (pid ${info.pid}) is alive but ${why}; waiting up to ${waitMs} ms`,
    );
    const deadline = Date.now() + waitMs;
    for (;;) {
      const seen = await this.inspector.inspect(info, 1, UNRESPONSIVE_PROBE_MS);
      if (seen.kind === "healthy") return this.wrap(seen.info);
      if (seen.kind === "unauthorized") throw this.refused(info);
      // It exited meanwhile: nothing of ours is left to wait for.
      if (seen.kind === "absent") return this.start(extras);
      if (Date.now() >= deadline) {
        await this.files.note(
          "warn",
          `the project's server (pid ${info.pid}) still unresponsive; left running`,
        );
        throw new ServerStartError(
          `the project's server (pid ${info.pid}, ${urlOf(info.port)}) is alive but ${why} after ${waitMs} ms; it is left running because agents may be using it. See ${this.files.logPath}; if it stays so, stop it with \`opencode-teams server stop\` and spawn again`,
        );
      }
      await Bun.sleep(500);
    }
  }

  private async start(extras: StartExtras | undefined): Promise<ProjectServer> {
    const configContent = await extras
      ?.configContent(this.env.OPENCODE_CONFIG_CONTENT)
      .catch(() => undefined);
    const outcome = await startServer({
      ...(configContent !== undefined ? { configContent } : {}),
      binary: this.opencodeBinary(),
      projectRoot: this.config.projectRoot,
      markers: this.markers,
      env: this.env,
      startTimeoutMs: this.config.startTimeoutMs,
      files: this.files,
    });
    if (outcome.kind === "failed") throw new ServerStartError(outcome.details);
    startedHere.add(outcome.info.pid);
    await this.files.write(outcome.info);
    // Its identity and health checked once more now, as the next ensureRunning would check them: the first spawn
    // after a prewarm then finds them known (the fds of the process walked, a health probe: tens of ms on a busy
    // machine) instead of paying for them. Awaited: a check still running once the start returned could meet
    // another process on the port by the time its probe (with the password) goes out.
    await this.inspector.inspect(outcome.info, 1).catch(() => {});
    return this.wrap(outcome.info);
  }

  /** For `opencode-teams server status` and get-agent-status: what runs, checked without starting anything. */
  async report(): Promise<ServerReport> {
    const recorded = await this.files.read();
    if (!recorded) return unrecordedReport(await findOrphan(this.config.projectRoot, this.markers));
    const seen = await this.inspector.inspect(recorded, 1, UNRESPONSIVE_PROBE_MS);
    return recordedReport(recorded, seen, this.files.logPath);
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
    return this.files.underStartLock(async () => {
      const info = await this.files.read();
      let target: { pid: number; port: number } | undefined;
      if (info) {
        const check = await this.inspector.verify(info);
        // One that stopped listening (wedged, half shut down) is still ours to stop: verify saw our markers.
        if (check === "ours" || check === "not-listening") target = info;
      }
      target ??= await findOrphan(this.config.projectRoot, this.markers);
      if (!target) {
        // The record names nothing of ours that runs (verified above): nothing is orphaned by removing it.
        if (info) await this.files.remove();
        return { stopped: false, detail: "no server of this project is running" };
      }
      // Asked under the start lock, right before the signal: a spawn that came in meanwhile keeps its server.
      if (stillIdle && !(await stillIdle())) {
        return {
          stopped: false,
          detail: `pid ${target.pid} left running: an agent of the project runs on it`,
        };
      }
      await this.files.note("info", `stopping the project's server pid ${target.pid}: ${reason}`);
      if (!(await this.inspector.terminate(target.pid))) {
        return {
          stopped: false,
          detail: `pid ${target.pid} survived SIGKILL or changed hands; server.json is kept`,
        };
      }
      startedHere.delete(target.pid);
      await this.files.remove();
      return { stopped: true, detail: `stopped ${urlOf(target.port)} (pid ${target.pid})` };
    }, this.startLockWaitMs);
  }

  /** Whether the recorded server is one this process started (the plugin's dispose only stops those). */
  async startedByThisProcess(): Promise<boolean> {
    const info = await this.files.read();
    return info !== undefined && startedHere.has(info.pid);
  }
}

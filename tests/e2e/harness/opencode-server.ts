/**
 * Hermetic real `opencode serve` fixture for end-to-end tests.
 *
 * Every start gets its own temp root with HOME and XDG_* inside it, a project dir with an opencode.json that uses the
 * mock model and loads the plugin under test, and pre-satisfied config-dir installs so OpenCode never reaches for
 * the npm registry. Every process started here is registered and killed on process exit, even when a test throws.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Message } from "@opencode-ai/sdk";
import {
  createOpencodeClient,
  type OpencodeClient,
  type Part,
  type SessionStatus,
  type ToolPart,
} from "@opencode-ai/sdk";
import { WARMUP_PROVIDER_ID } from "../../../src/edges/warmup-config.ts";
import { stopProjectServers } from "./project-servers.ts";

// ---------------------------------------------------------------------------------------------------------------
// Paths

/** Repository root, derived from this file's location (tests/e2e/harness/ -> ../../..). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const OPENCODE_BIN = path.join(REPO_ROOT, "node_modules", ".bin", "opencode");
/** The plugin under test. */
export const PLUGIN_ENTRY = path.join(REPO_ROOT, "src", "index.ts");

function opencodeVersion(): string {
  try {
    const pkg: unknown = JSON.parse(
      readFileSync(path.join(REPO_ROOT, "node_modules", "opencode-ai", "package.json"), "utf8"),
    );
    if (
      typeof pkg === "object" &&
      pkg !== null &&
      typeof (pkg as { version?: unknown }).version === "string"
    ) {
      return (pkg as { version: string }).version;
    }
  } catch {
    // fall through
  }
  return "latest";
}

// ---------------------------------------------------------------------------------------------------------------
// Types

export type PluginSpec = string | [string, Record<string, unknown>];

export interface StartOpencodeOptions {
  /** Base URL of the mock model, e.g. `mock.baseUrl` (becomes MOCK_BASE_URL). */
  mockBaseUrl: string;
  /** Use this project dir instead of a fresh temp one (it is not deleted on stop). */
  projectDir?: string;
  /** Plugin module to load (absolute path or file:// URL). Default: the repo's src/index.ts. `false`: none. */
  plugin?: string | false;
  /** Options passed to the plugin (the second element of the config tuple). */
  pluginOptions?: Record<string, unknown>;
  /** More entries for the config's `plugin` array. */
  extraPlugins?: PluginSpec[];
  /** Shallow-merged over the generated opencode.json (e.g. `{ agent: {...} }`). */
  config?: Record<string, unknown>;
  /**
   * Make the project a git repo with one empty commit. Without it OpenCode reports worktree "/" and project id
   * "global", and a sub-directory of the project becomes its own instance root.
   */
  gitInit?: boolean;
  /** Write `<project>/opencode.json` (default true). When false the caller provides the config. */
  writeConfig?: boolean;
  /** Extra environment for the server (e.g. OPENCODE_TEAMS_DIR, a tmux socket name). Wins over the defaults. */
  env?: Record<string, string>;
  /** Overall start timeout (listening line + health). Default 60 s. */
  startTimeoutMs?: number;
  /**
   * `provider/model` from the user's own OpenCode setup instead of the mock: HOME, XDG_* and OPENCODE_* come from this
   * process (so the user's config and credentials apply), the user's config dir is left alone, and no mock provider is
   * configured. Only for `npm run demo -- --model`; tests stay hermetic.
   */
  realModel?: string;
  /** Server log level (`--log-level`). Default INFO. */
  logLevel?: "DEBUG" | "INFO" | "WARN" | "ERROR";
  /** Fixed port; default: a free port picked at start and kept across restarts. */
  port?: number;
  /** SIGTERM -> SIGKILL grace period on stop. Default 3 s. */
  stopGraceMs?: number;
}

/** The dirs OpenCode reads its config, data and credentials from, always spelled out. */
type ServerDirs = Record<string, string> & {
  HOME: string;
  XDG_CONFIG_HOME: string;
  XDG_DATA_HOME: string;
  XDG_CACHE_HOME: string;
  XDG_STATE_HOME: string;
};

/** The server's environment; the hermetic dirs are always present (the user's own with `realModel`). */
export type ServerEnv = ServerDirs & { MOCK_BASE_URL: string };

export interface ToolResultInfo {
  tool: string;
  callID: string;
  messageID: string;
  status: ToolPart["state"]["status"];
  input: Record<string, unknown>;
  /** Present when completed. */
  output?: string;
  /** Present when status is "error". */
  error?: string;
  title?: string;
  metadata?: Record<string, unknown>;
  part: ToolPart;
}

export interface SessionMessage {
  info: Message;
  parts: Part[];
}

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Included in the timeout error. */
  message?: string;
}

export interface PromptOptions {
  /** Default 60 s. */
  timeoutMs?: number;
  /** Agent name for the prompt. */
  agent?: string;
  /** Abort the session if it does not finish in time (default true). */
  abortOnTimeout?: boolean;
}

export interface OpencodeServer {
  readonly url: string;
  readonly port: number;
  /** PID of the current `opencode serve` process (changes on restart). */
  readonly pid: number;
  readonly projectDir: string;
  /** Temp root holding home/, xdg/, project/ and opencode.log. */
  readonly rootDir: string;
  /** The full environment the server runs with. */
  readonly env: ServerEnv;
  /** v1 SDK client bound to `url` and `projectDir`. */
  readonly client: OpencodeClient;
  readonly logPath: string;
  /** Milliseconds from spawn to healthy for the latest (re)start. */
  readonly startupMs: number;
  /** Stop the server (SIGTERM, SIGKILL after the grace period) and delete the temp root. Idempotent. */
  stop(): Promise<void>;
  /** Stop (if running) and start again on the same port with the same dirs and env. */
  restart(): Promise<void>;
  /** Send a signal to the server process (e.g. "SIGKILL" to simulate a crash). Does not wait. */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves when the current process has exited. */
  waitForExit(timeoutMs?: number): Promise<void>;
  isRunning(): boolean;
  /** Last `lines` lines of the server log. */
  logTail(lines?: number): string;
  /** GET /experimental/tool/ids for a directory (default: projectDir). */
  toolIds(directory?: string): Promise<string[]>;
  /** Poll tool ids until every name is present; throws with the log tail on timeout. */
  waitForToolIds(names: string[], opts?: WaitOptions & { directory?: string }): Promise<string[]>;
  /** Create a session in projectDir; returns its id. Pass a title to avoid the title-generator request. */
  createSession(title?: string, opts?: { parentID?: string; directory?: string }): Promise<string>;
  /** Fire a prompt without waiting (prompt_async). */
  promptAsync(sessionId: string, text: string, opts?: { agent?: string }): Promise<void>;
  /** Send a prompt and wait until the session is idle again; returns all the session's messages. */
  promptAndWait(sessionId: string, text: string, opts?: PromptOptions): Promise<SessionMessage[]>;
  /** Wait until the session is idle (absent from /session/status or type idle). */
  waitForIdle(sessionId: string, opts?: WaitOptions): Promise<void>;
  /** GET /session/status. */
  sessionStatus(): Promise<Record<string, SessionStatus>>;
  /** GET /session/{id}/message. */
  messages(sessionId: string): Promise<SessionMessage[]>;
  /** Tool parts of a session, optionally only those of one tool, in order. */
  toolResults(sessionId: string, toolName?: string): Promise<ToolResultInfo[]>;
  /** Text of the session's last assistant message (e.g. the mock's `DONE <tool>: <result>`). */
  lastAssistantText(sessionId: string): Promise<string>;
}

// ---------------------------------------------------------------------------------------------------------------
// Generic helpers

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Poll `predicate` until it returns a truthy value (returned) or the timeout expires (throws). */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  opts: WaitOptions = {},
): Promise<Exclude<T, false | null | undefined | 0 | "">> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 100;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v as Exclude<T, false | null | undefined | 0 | "">;
      lastError = undefined;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(
        `waitFor timed out after ${timeoutMs} ms${opts.message ? `: ${opts.message}` : ""}${why}`,
      );
    }
    await sleep(intervalMs);
  }
}

/** A TCP port that was free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      if (addr === null || typeof addr === "string") {
        srv.close();
        reject(new Error("freePort: no address"));
        return;
      }
      const { port } = addr;
      srv.close(() => resolve(port));
    });
  });
}

function tail(file: string, lines: number): string {
  try {
    const text = readFileSync(file, "utf8");
    return text.split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

async function fetchWithTimeout(url: string, timeoutMs: number): Promise<Response> {
  return fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
}

/** The tool parts of a conversation (optionally only one tool's), in order. */
export function toolResultsOf(messages: readonly SessionMessage[], toolName?: string): ToolResultInfo[] {
  const out: ToolResultInfo[] = [];
  for (const m of messages) {
    for (const p of m.parts) {
      if (p.type !== "tool") continue;
      if (toolName !== undefined && p.tool !== toolName) continue;
      const s = p.state;
      const info: ToolResultInfo = {
        tool: p.tool,
        callID: p.callID,
        messageID: p.messageID,
        status: s.status,
        input: s.input,
        part: p,
      };
      if (s.status === "completed") {
        info.output = s.output;
        info.title = s.title;
        info.metadata = s.metadata;
      } else if (s.status === "error") {
        info.error = s.error;
        if (s.metadata) info.metadata = s.metadata;
      } else if (s.status === "running") {
        if (s.title !== undefined) info.title = s.title;
        if (s.metadata) info.metadata = s.metadata;
      }
      out.push(info);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Process registry: everything this harness started is killed when the test process goes away.

interface Tracked {
  pid: number;
  /** The watchdog shell that kills `pid` if this test process dies first. */
  reaperPid: number | undefined;
}
const livePids = new Map<number, Tracked>();
const ownedDirs = new Set<string>();
const keepTemp = process.env.OPENCODE_E2E_KEEP === "1";
let exitHookInstalled = false;

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Fires under `node` / `bun run`; `bun test` does not emit "exit", which is why every server also gets a reaper.
  process.on("exit", () => {
    killAllStarted();
    if (!keepTemp) for (const d of ownedDirs) rmSync(d, { recursive: true, force: true });
  });
}

/**
 * A detached `sh` loop that waits for this test process to die and then kills the server's process group and removes
 * its temp root. It exits by itself when the server exits first, and `stop()` kills it. This is what makes a crashed,
 * Ctrl-C'd or SIGKILLed test run leak nothing.
 */
function startReaper(serverPid: number, rootDir: string | undefined): number | undefined {
  const script = [
    `while kill -0 ${process.pid} 2>/dev/null; do`,
    `  kill -0 ${serverPid} 2>/dev/null || exit 0`,
    "  sleep 1",
    "done",
    `kill -TERM ${serverPid} 2>/dev/null`,
    "sleep 2",
    `kill -KILL -${serverPid} 2>/dev/null`,
    `kill -KILL ${serverPid} 2>/dev/null`,
    rootDir ? `rm -rf '${rootDir.replace(/'/g, "'\\''")}'` : "true",
  ].join("\n");
  const reaper = spawn("sh", ["-c", script], { stdio: "ignore", detached: true });
  reaper.unref();
  return reaper.pid;
}

/** Kill every process this harness started and that is still running (synchronous, SIGKILL). */
export function killAllStarted(): void {
  for (const t of livePids.values()) {
    killQuietly(t.pid, "SIGKILL");
    killQuietly(-t.pid, "SIGKILL");
    if (t.reaperPid !== undefined) killQuietly(t.reaperPid, "SIGKILL");
  }
  livePids.clear();
}

/** PIDs of the `opencode serve` processes this harness started that are still running. */
export function startedPids(): number[] {
  return [...livePids.keys()];
}

// ---------------------------------------------------------------------------------------------------------------
// Config

/**
 * The mock provider config (model `mock/mock-model`), reading the mock's URL from MOCK_BASE_URL at load time. Only the
 * mock is enabled, and the plugin's own warm-up provider, which a project server the plugin prewarms gets (a user who
 * filters providers without naming it gets no warm-up turn: specs/spawn-agent.md).
 */
export function mockProviderConfig(): Record<string, unknown> {
  return {
    $schema: "https://opencode.ai/config.json",
    model: "mock/mock-model",
    small_model: "mock/mock-model",
    enabled_providers: ["mock", WARMUP_PROVIDER_ID],
    autoupdate: false,
    share: "disabled",
    lsp: false,
    formatter: false,
    provider: {
      mock: {
        npm: "@ai-sdk/openai-compatible",
        options: { baseURL: "{env:MOCK_BASE_URL}", apiKey: "k" },
        models: { "mock-model": { tool_call: true, limit: { context: 100000, output: 4096 } } },
      },
    },
  };
}

/**
 * The mock provider with a price for its model (USD per million tokens, as opencode.json takes it): $1000 in, $2000
 * out, so each answer (10 prompt + 5 completion tokens) costs exactly $0.02. Pass as `config: { provider: … }`.
 */
export function pricedMockProvider(): Record<string, unknown> {
  const { provider } = mockProviderConfig() as { provider: { mock: { models: Record<string, object> } } };
  const model = provider.mock.models["mock-model"];
  provider.mock.models["mock-model"] = { ...model, cost: { input: 1000, output: 2000 } };
  return provider;
}

function toFileUrl(p: string): string {
  return p.startsWith("file://") ? p : pathToFileURL(p).href;
}

/**
 * OpenCode runs `npm install @opencode-ai/plugin` in each config dir it uses before loading plugins. It skips that when
 * `<dir>/node_modules` exists and `<dir>/package-lock.json` `packages[""].dependencies` names every dependency of
 * `<dir>/package.json`. Make that true, and link the repo's @opencode-ai/plugin so `.opencode/plugins/*.ts` resolve it.
 */
export function presatisfyConfigDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const pkgPath = path.join(dir, "package.json");
  let deps: Record<string, string> = {};
  if (existsSync(pkgPath)) {
    const parsed: unknown = JSON.parse(readFileSync(pkgPath, "utf8"));
    const d =
      typeof parsed === "object" && parsed !== null
        ? (parsed as { dependencies?: unknown }).dependencies
        : undefined;
    if (typeof d === "object" && d !== null) {
      for (const [k, v] of Object.entries(d)) deps[k] = String(v);
    }
  }
  if (!("@opencode-ai/plugin" in deps)) {
    deps = { ...deps, "@opencode-ai/plugin": opencodeVersion() };
    writeFileSync(pkgPath, `${JSON.stringify({ dependencies: deps }, null, 2)}\n`);
  }
  writeFileSync(
    path.join(dir, "package-lock.json"),
    `${JSON.stringify({ lockfileVersion: 3, requires: true, packages: { "": { dependencies: deps } } }, null, 2)}\n`,
  );
  const scope = path.join(dir, "node_modules", "@opencode-ai");
  mkdirSync(scope, { recursive: true });
  const link = path.join(scope, "plugin");
  const target = path.join(REPO_ROOT, "node_modules", "@opencode-ai", "plugin");
  if (!existsSync(link) && existsSync(target)) symlinkSync(target, link, "dir");
}

/** Environment with nothing inherited that could point OpenCode (or tmux) at the user's real setup. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (k.startsWith("OPENCODE")) continue;
    if (k === "TMUX" || k === "TMUX_PANE") continue;
    if (k.startsWith("XDG_")) continue;
    env[k] = v;
  }
  return env;
}

/**
 * This process's environment for a server that must see the user's real OpenCode setup: the XDG dirs spelled out
 * with their defaults (the same dirs OpenCode would pick), only tmux's pointers to an enclosing session left out.
 */
function userEnv(): ServerDirs {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && k !== "TMUX" && k !== "TMUX_PANE") env[k] = v;
  }
  const home = process.env.HOME ?? os.homedir();
  return {
    ...env,
    HOME: home,
    XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME ?? path.join(home, ".config"),
    XDG_DATA_HOME: process.env.XDG_DATA_HOME ?? path.join(home, ".local", "share"),
    XDG_CACHE_HOME: process.env.XDG_CACHE_HOME ?? path.join(home, ".cache"),
    XDG_STATE_HOME: process.env.XDG_STATE_HOME ?? path.join(home, ".local", "state"),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The fixture

export async function startOpencode(opts: StartOpencodeOptions): Promise<OpencodeServer> {
  installExitHook();
  const rootDir = realpathSync(mkdtempSync(path.join(os.tmpdir(), "oc-e2e-")));
  ownedDirs.add(rootDir);
  const home = path.join(rootDir, "home");
  const xdg = {
    XDG_CONFIG_HOME: path.join(rootDir, "xdg", "config"),
    XDG_DATA_HOME: path.join(rootDir, "xdg", "data"),
    XDG_CACHE_HOME: path.join(rootDir, "xdg", "cache"),
    XDG_STATE_HOME: path.join(rootDir, "xdg", "state"),
  };
  for (const d of [home, ...Object.values(xdg)]) mkdirSync(d, { recursive: true });
  const projectDir = opts.projectDir ? realpathSync(opts.projectDir) : path.join(rootDir, "project");
  mkdirSync(projectDir, { recursive: true });

  if (opts.gitInit) {
    const git = (args: string[]): void => {
      // HOME points at the temp home so the user's ~/.gitconfig (signing, hooks) cannot interfere.
      const gitEnv = { ...process.env, HOME: home, GIT_CONFIG_NOSYSTEM: "1" };
      const r = spawnSync("git", args, { cwd: projectDir, encoding: "utf8", env: gitEnv });
      if (r.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${r.stderr}`);
    };
    git(["init", "-q"]);
    git([
      "-c",
      "user.name=e2e",
      "-c",
      "user.email=e2e@example.invalid",
      "commit",
      "-q",
      "--allow-empty",
      "-m",
      "init",
    ]);
  }
  if (opts.writeConfig !== false) {
    const plugins: PluginSpec[] = [];
    if (opts.plugin !== false) {
      const entry = toFileUrl(opts.plugin ?? PLUGIN_ENTRY);
      plugins.push(opts.pluginOptions ? [entry, opts.pluginOptions] : entry);
    }
    plugins.push(...(opts.extraPlugins ?? []));
    const provider = opts.realModel
      ? {
          $schema: "https://opencode.ai/config.json",
          model: opts.realModel,
          autoupdate: false,
          share: "disabled",
        }
      : mockProviderConfig();
    const config: Record<string, unknown> = {
      ...provider,
      plugin: plugins,
      ...(opts.config ?? {}),
    };
    writeFileSync(path.join(projectDir, "opencode.json"), `${JSON.stringify(config, null, 2)}\n`);
  }
  presatisfyConfigDir(path.join(projectDir, ".opencode"));
  if (!opts.realModel) presatisfyConfigDir(path.join(xdg.XDG_CONFIG_HOME, "opencode"));

  const dirs: ServerDirs = opts.realModel ? userEnv() : { ...baseEnv(), HOME: home, ...xdg };
  const env: ServerEnv = {
    ...dirs,
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    MOCK_BASE_URL: opts.mockBaseUrl,
    // What the plugin's server manager gives a project server it starts: tests that record this server as the
    // project's (ServerInfo) need it to carry the project's markers, or the plugin rightly refuses to trust it.
    OPENCODE_TEAMS_PROJECT_ROOT: projectDir,
    OPENCODE_TEAMS_DIR: path.join(projectDir, ".opencode", "opencode-teams"),
    ...(opts.env ?? {}),
  };
  const logPath = path.join(rootDir, "opencode.log");
  const startTimeoutMs = opts.startTimeoutMs ?? 60_000;
  const stopGraceMs = opts.stopGraceMs ?? 3_000;
  let port = opts.port ?? (await freePort());
  const url = (): string => `http://127.0.0.1:${port}`;

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let running = false;
  let startupMs = 0;
  let stopped = false;

  async function spawnOnce(): Promise<void> {
    const fd = openSync(logPath, "a");
    writeSync(fd, `\n=== opencode-e2e: starting on port ${port} at ${new Date().toISOString()} ===\n`);
    const markerEnd = statSync(logPath).size;
    const t0 = Date.now();
    const proc = spawn(
      OPENCODE_BIN,
      [
        "serve",
        "--hostname",
        "127.0.0.1",
        "--port",
        String(port),
        "--print-logs",
        "--log-level",
        opts.logLevel ?? "INFO",
      ],
      { cwd: projectDir, env, stdio: ["ignore", fd, fd], detached: true },
    );
    closeSync(fd);
    const pid = proc.pid;
    if (pid === undefined) throw new Error(`failed to spawn ${OPENCODE_BIN}`);
    child = proc;
    running = true;
    const reaperPid = startReaper(pid, keepTemp ? undefined : rootDir);
    livePids.set(pid, { pid, reaperPid });
    exited = new Promise<void>((resolve) => {
      proc.once("exit", () => {
        running = false;
        livePids.delete(pid);
        if (reaperPid !== undefined) killQuietly(reaperPid, "SIGKILL");
        // Sweep what the server left in its own process group (it was started as the group leader).
        killQuietly(-pid, "SIGKILL");
        resolve();
      });
    });
    proc.unref();

    const deadline = t0 + startTimeoutMs;
    const fail = (why: string): Error =>
      new Error(`opencode serve ${why} (pid ${pid}, port ${port}); log ${logPath}:\n${tail(logPath, 40)}`);
    // 1) the "listening" line after our marker
    for (;;) {
      if (!running) throw fail("exited before listening");
      const text = readFileSync(logPath).subarray(markerEnd).toString("utf8");
      if (text.includes("opencode server listening on")) break;
      if (Date.now() > deadline) {
        await stopProcess();
        throw fail(`did not print its listening line within ${startTimeoutMs} ms`);
      }
      await sleep(50);
    }
    // 2) health, each poll with its own short timeout
    for (;;) {
      if (!running) throw fail("exited before healthy");
      try {
        const res = await fetchWithTimeout(`${url()}/global/health`, 400);
        if (res.ok) {
          const body: unknown = await res.json();
          if (typeof body === "object" && body !== null && (body as { healthy?: unknown }).healthy === true)
            break;
        }
      } catch {
        // retry
      }
      if (Date.now() > deadline) {
        await stopProcess();
        throw fail(`not healthy within ${startTimeoutMs} ms`);
      }
      await sleep(100);
    }
    startupMs = Date.now() - t0;
  }

  async function stopProcess(): Promise<void> {
    const proc = child;
    if (!proc || !running || proc.pid === undefined) return;
    const pid = proc.pid;
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // gone
    }
    const graceful = await Promise.race([exited.then(() => true), sleep(stopGraceMs).then(() => false)]);
    if (!graceful) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
      await Promise.race([exited, sleep(5_000)]);
    }
  }

  // First start; if the picked port was taken in the meantime, try another free port.
  for (let attempt = 0; ; attempt++) {
    try {
      await spawnOnce();
      break;
    } catch (e) {
      const log = tail(logPath, 40);
      if (
        attempt < 2 &&
        opts.port === undefined &&
        /EADDRINUSE|address already in use|ServeError/i.test(log)
      ) {
        await stopProcess();
        port = await freePort();
        continue;
      }
      await stopProcess();
      if (!keepTemp) {
        rmSync(rootDir, { recursive: true, force: true });
        ownedDirs.delete(rootDir);
      }
      throw e;
    }
  }

  const client = createOpencodeClient({ baseUrl: url(), directory: projectDir });

  async function getJson<T>(pathAndQuery: string, timeoutMs = 10_000): Promise<T> {
    const res = await fetch(`${url()}${pathAndQuery}`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`GET ${pathAndQuery} -> ${res.status}: ${await res.text()}`);
    return (await res.json()) as T;
  }

  const dirQuery = (dir?: string): string => `directory=${encodeURIComponent(dir ?? projectDir)}`;

  async function messages(sessionId: string): Promise<SessionMessage[]> {
    return getJson<SessionMessage[]>(`/session/${encodeURIComponent(sessionId)}/message?${dirQuery()}`);
  }

  async function sessionStatus(): Promise<Record<string, SessionStatus>> {
    return getJson<Record<string, SessionStatus>>(`/session/status?${dirQuery()}`);
  }

  async function isIdle(sessionId: string): Promise<boolean> {
    const st = (await sessionStatus())[sessionId];
    return st === undefined || st.type === "idle";
  }

  async function waitForIdle(sessionId: string, w: WaitOptions = {}): Promise<void> {
    await waitFor(() => isIdle(sessionId), {
      timeoutMs: w.timeoutMs ?? 60_000,
      intervalMs: w.intervalMs ?? 150,
      message: w.message ?? `session ${sessionId} to become idle`,
    });
  }

  async function promptAsync(sessionId: string, text: string, o: { agent?: string } = {}): Promise<void> {
    const r = await client.session.promptAsync({
      path: { id: sessionId },
      body: { parts: [{ type: "text", text }], ...(o.agent ? { agent: o.agent } : {}) },
    });
    if (r.error !== undefined || !r.response.ok) {
      throw new Error(`prompt_async ${sessionId} failed: ${r.response.status} ${JSON.stringify(r.error)}`);
    }
  }

  function userMessageHasText(m: SessionMessage, text: string): boolean {
    return m.info.role === "user" && m.parts.some((p) => p.type === "text" && p.text === text);
  }

  async function promptAndWait(
    sessionId: string,
    text: string,
    o: PromptOptions = {},
  ): Promise<SessionMessage[]> {
    const timeoutMs = o.timeoutMs ?? 60_000;
    const before = (await messages(sessionId)).length;
    await promptAsync(sessionId, text, o.agent ? { agent: o.agent } : {});
    try {
      // Done = our user message is stored, an assistant message after it has finished, and the session is idle.
      // (Right after prompt_async the status may not say busy yet, so idleness alone is not enough.)
      return await waitFor(
        async () => {
          const msgs = await messages(sessionId);
          const userIdx = msgs.findIndex((m, i) => i >= before && userMessageHasText(m, text));
          if (userIdx === -1) return undefined;
          // The plugin may add user messages without a turn (`noReply` notices to the leader) after the answer, so
          // the answer is the last assistant message after ours, not necessarily the last message.
          const info = msgs.slice(userIdx + 1).findLast((m) => m.info.role === "assistant")?.info;
          if (info?.role !== "assistant") return undefined;
          const finished = info.time.completed !== undefined || info.error !== undefined;
          if (!finished) return undefined;
          if (info.finish === "tool-calls" && info.error === undefined) return undefined; // loop continues
          return (await isIdle(sessionId)) ? msgs : undefined;
        },
        { timeoutMs, intervalMs: 150, message: `prompt in session ${sessionId} to finish` },
      );
    } catch (e) {
      if (o.abortOnTimeout !== false)
        await client.session.abort({ path: { id: sessionId } }).catch(() => undefined);
      throw new Error(`${(e as Error).message}\nserver log tail:\n${tail(logPath, 30)}`);
    }
  }

  async function toolResults(sessionId: string, toolName?: string): Promise<ToolResultInfo[]> {
    return toolResultsOf(await messages(sessionId), toolName);
  }

  const server: OpencodeServer = {
    get url() {
      return url();
    },
    get port() {
      return port;
    },
    get pid() {
      return child?.pid ?? -1;
    },
    projectDir,
    rootDir,
    env,
    client,
    logPath,
    get startupMs() {
      return startupMs;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopProcess();
      // The plugin's own project servers run detached: they go with the test's project.
      await stopProjectServers(
        projectDir,
        env.OPENCODE_TEAMS_DIR ?? path.join(projectDir, ".opencode", "opencode-teams"),
      );
      if (!keepTemp) {
        rmSync(rootDir, { recursive: true, force: true });
        ownedDirs.delete(rootDir);
      } else {
        console.error(`[opencode-e2e] kept ${rootDir}`);
      }
    },
    async restart() {
      if (stopped) throw new Error("restart after stop");
      await stopProcess();
      await spawnOnce();
    },
    kill(signal: NodeJS.Signals = "SIGTERM") {
      const pid = child?.pid;
      if (pid === undefined || !running) return;
      process.kill(pid, signal);
    },
    async waitForExit(timeoutMs = 10_000) {
      const ok = await Promise.race([exited.then(() => true), sleep(timeoutMs).then(() => false)]);
      if (!ok) throw new Error(`opencode serve (pid ${child?.pid}) did not exit within ${timeoutMs} ms`);
    },
    isRunning() {
      return running;
    },
    logTail(lines = 40) {
      return tail(logPath, lines);
    },
    async toolIds(directory?: string) {
      return getJson<string[]>(`/experimental/tool/ids?${dirQuery(directory)}`, 30_000);
    },
    async waitForToolIds(names, w = {}) {
      let last: string[] = [];
      try {
        return await waitFor(
          async () => {
            last = await server.toolIds(w.directory);
            return names.every((n) => last.includes(n)) ? last : undefined;
          },
          { timeoutMs: w.timeoutMs ?? 30_000, intervalMs: w.intervalMs ?? 250 },
        );
      } catch (e) {
        const missing = names.filter((n) => !last.includes(n));
        throw new Error(
          `tool ids never included ${JSON.stringify(missing)} (${(e as Error).message}); got ${JSON.stringify(last)}.\n` +
            `A plugin that fails to import is dropped; server log tail (${logPath}):\n${tail(logPath, 40)}`,
        );
      }
    },
    async createSession(title?: string, o: { parentID?: string; directory?: string } = {}) {
      const body: { title?: string; parentID?: string } = {};
      if (title !== undefined) body.title = title;
      if (o.parentID !== undefined) body.parentID = o.parentID;
      const r = await client.session.create({
        body,
        ...(o.directory ? { query: { directory: o.directory } } : {}),
      });
      if (!r.data) throw new Error(`session.create failed: ${r.response.status} ${JSON.stringify(r.error)}`);
      return r.data.id;
    },
    promptAsync,
    promptAndWait,
    waitForIdle,
    sessionStatus,
    messages,
    toolResults,
    async lastAssistantText(sessionId: string) {
      const msgs = await messages(sessionId);
      for (let i = msgs.length - 1; i >= 0; i--) {
        const m = msgs[i];
        if (m?.info.role !== "assistant") continue;
        const text = m.parts
          .filter((p): p is Extract<Part, { type: "text" }> => p.type === "text")
          .map((p) => p.text)
          .join("");
        if (text !== "") return text;
      }
      return "";
    },
  };
  return server;
}

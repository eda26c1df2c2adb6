import { randomBytes } from "node:crypto";
import {
  type LivePanes,
  type MarkedPane,
  ownsLivePane,
  type PaneRef,
  type PaneSpec,
  type TmuxApi,
} from "./tmux-api.ts";

export class TmuxError extends Error {
  override name = "TmuxError";
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Size of a detached team session before anyone attaches: tmux's 80x24 default leaves no room for several panes. */
const DETACHED_WIDTH = 240;
const DETACHED_HEIGHT = 64;
/** Identity of a tmux server: its pid and start time (seconds) differ after a restart, when pane ids start over. */
const SERVER_FORMAT = "#{pid}:#{start_time}";
const PANE_FORMAT = `#{pane_id}\t#{pane_pid}\t#{window_id}\t${SERVER_FORMAT}`;
/** What decides whose a pane is; `@agent_id` last, as a user could set it to anything (tabs included). */
const OWNER_FORMAT = `#{pane_id}\t#{pane_dead}\t${SERVER_FORMAT}\t#{@agent_id}`;
/** Printed by the checked action (see ifOwned) when the pane was the agent's and the action ran. */
const OWNED_MARK = "oct-owned";
const NO_PANE = /can't find|no server running|not found|error connecting|no such file/i;
/** What tmux says when the server a socket names is not running: no panes there, rather than a failure. */
const NO_SERVER = /no server running|error connecting|no such file/i;
/** Pane titles can be overwritten by the program in the pane (OSC 2), so the border prefers our own option. */
const BORDER_FORMAT = " #{?#{@agent_name},#{@agent_name},#{pane_title}} ";

/**
 * tmux expands `#{...}` and `#(...)` in the values of -c, -n, -s and -T. `##` is a literal `#`, so escaping every `#`
 * keeps a directory or name from running a command or being rewritten.
 */
export function escapeFormat(value: string): string {
  return value.replaceAll("#", "##");
}

/**
 * One argument in tmux's command language (used when a command goes through `source-file -` on stdin). Inside double
 * quotes tmux processes backslash escapes and `$VAR`, so both are escaped, and control characters are spelled out.
 */
export function quoteTmuxArg(value: string): string {
  let out = '"';
  for (const char of value) {
    switch (char) {
      case "\\":
        out += "\\\\";
        break;
      case '"':
        out += '\\"';
        break;
      case "$":
        out += "\\$";
        break;
      case "\n":
        out += "\\n";
        break;
      case "\r":
        out += "\\r";
        break;
      case "\t":
        out += "\\t";
        break;
      default: {
        const code = char.codePointAt(0) ?? 0;
        out += code < 0x20 || code === 0x7f ? `\\u${code.toString(16).padStart(4, "0")}` : char;
      }
    }
  }
  return `${out}"`;
}

/**
 * TmuxApi over the tmux binary. Commands go to tmux as argv (no shell); a command carrying environment values
 * (secrets) is written to `tmux source-file -` on stdin instead, so no value ever appears in a process's argv.
 */
const AVAILABLE_CACHE_MS = 60_000;

/**
 * Several tmux commands as one argv, separated by ";" arguments. tmux also reads a ";" at the end of any argument as
 * a separator, so a value ending in one (a title like "fix;") has it escaped.
 */
export function commandSequence(commands: readonly (readonly string[])[]): string[] {
  return commands.flatMap((command, index) => [
    ...(index > 0 ? [";"] : []),
    ...command.map((arg) => (arg.endsWith(";") ? `${arg.slice(0, -1)}\\;` : arg)),
  ]);
}

interface OwnerLine {
  paneId: string;
  dead: boolean;
  server: string;
  agentId: string;
}

function parseOwnerLine(line: string): OwnerLine | undefined {
  const [paneId, dead, server, ...agentId] = line.split("\t");
  if (paneId === undefined || dead === undefined || server === undefined) return undefined;
  return { paneId, dead: dead !== "0", server, agentId: agentId.join("\t") };
}

/**
 * The tmux format that is true only while the pane is the agent's (see PaneRef), or undefined when a recorded value
 * is not of the shape we write (a damaged record): such values never go into a tmux command, and the pane is
 * treated as not the agent's.
 */
function ownershipCondition(ref: PaneRef): string | undefined {
  if (!/^%\d+$/.test(ref.paneId) || !/^[A-Za-z0-9_-]+$/.test(ref.agentId)) return undefined;
  if (ref.server !== undefined && !/^\d+:\d+$/.test(ref.server)) return undefined;
  const checks = [
    `#{==:#{pane_id},${ref.paneId}}`,
    `#{==:#{@agent_id},${ref.agentId}}`,
    ...(ref.server === undefined ? [] : [`#{==:${SERVER_FORMAT},${ref.server}}`]),
  ];
  return checks.reduce((all, check) => `#{&&:${all},${check}}`);
}

/**
 * How a pane is created: a detached session of its own (`windowId` null: no such session), a window in the user's
 * session (undefined: the session has no team window), or a split of the team's window.
 */
function createArgs(spec: PaneSpec, windowId: string | null | undefined): string[] {
  if (windowId === null) {
    return [
      "new-session",
      "-d",
      "-s",
      escapeFormat(spec.session),
      "-n",
      escapeFormat(spec.window),
      "-x",
      String(DETACHED_WIDTH),
      "-y",
      String(DETACHED_HEIGHT),
    ];
  }
  if (windowId === undefined)
    return ["new-window", "-d", "-t", `=${spec.session}:`, "-n", escapeFormat(spec.window)];
  return ["split-window", "-d", "-t", windowId];
}

/** The new pane as tmux's `-P` line reports it; anything else is an error rather than a pane we cannot vouch for. */
function parseCreatedPane(created: string): {
  paneId: string;
  panePid: number;
  windowId: string;
  server: string;
} {
  const [paneId, pidText, windowId, server] = created.trim().split("\t");
  const panePid = Number(pidText);
  if (
    !paneId ||
    !/^%\d+$/.test(paneId) ||
    !windowId?.startsWith("@") ||
    !Number.isInteger(panePid) ||
    panePid <= 0 ||
    !server ||
    !/^\d+:\d+$/.test(server)
  )
    throw new TmuxError(`tmux did not report the new pane: ${JSON.stringify(created.trim())}`);
  return { paneId, panePid, windowId, server };
}

/** The new pane's title and options, and the window's layout (and borders, when the window is ours). */
function paneSetup(spec: PaneSpec, paneId: string, windowId: string, newWindow: boolean): string[][] {
  return [
    ["select-pane", "-t", paneId, "-T", escapeFormat(spec.title)],
    ...Object.entries(spec.options ?? {}).map(([name, value]) => [
      "set-option",
      "-p",
      "-t",
      paneId,
      `@${name}`,
      value,
    ]),
    // Only our own team window gets borders with agent names; the user's other windows stay as they were.
    ...(newWindow
      ? [
          ["set-option", "-w", "-t", windowId, "pane-border-status", "top"],
          ["set-option", "-w", "-t", windowId, "pane-border-format", BORDER_FORMAT],
        ]
      : []),
    ["select-layout", "-t", windowId, spec.layout ?? "tiled"],
  ];
}

export class TmuxCli implements TmuxApi {
  /** Window creation per (socket, session, window) is serialised so concurrent spawns make one window, not five. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly binary = "tmux",
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  private clientEnv(socket: string | undefined): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(this.env)) if (value !== undefined) env[key] = value;
    // $TMUX would point the client at the server this process runs inside; a private socket must not see it.
    if (socket) {
      delete env.TMUX;
      delete env.TMUX_PANE;
    }
    return env;
  }

  private async run(socket: string | undefined, args: string[], stdin?: string): Promise<RunResult> {
    const argv = [this.binary, ...(socket ? ["-L", socket] : []), ...args];
    let child: Bun.Subprocess<"pipe" | "ignore", "pipe", "pipe">;
    try {
      child = Bun.spawn(argv, {
        stdin: stdin === undefined ? "ignore" : "pipe",
        stdout: "pipe",
        stderr: "pipe",
        env: this.clientEnv(socket),
      });
    } catch (error) {
      throw new TmuxError(`cannot run tmux: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (stdin !== undefined && child.stdin && typeof child.stdin !== "number") {
      child.stdin.write(stdin);
      await child.stdin.end();
    }
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { code, stdout, stderr };
  }

  private async must(
    socket: string | undefined,
    args: string[],
    stdin?: string,
    label = args[0],
  ): Promise<string> {
    const result = await this.run(socket, args, stdin);
    if (result.code !== 0) {
      throw new TmuxError(`tmux ${label} failed: ${result.stderr.trim() || `exit ${result.code}`}`);
    }
    return result.stdout;
  }

  /** Run one tmux command; with `env`, through stdin so the values stay out of argv. */
  private async command(socket: string | undefined, args: string[], env: Record<string, string>) {
    const envArgs = Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
    const [name, ...rest] = args;
    if (!name) throw new TmuxError("empty tmux command");
    if (envArgs.length === 0) return this.must(socket, args);
    const line = [name, ...envArgs, ...rest].map(quoteTmuxArg).join(" ");
    // source-file needs a running server; start-server in the same client keeps one up for the command that follows.
    return this.must(socket, ["start-server", ";", "source-file", "-"], `${line}\n`, name);
  }

  private serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(key) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(fn);
    this.queues.set(key, next);
    void next
      .catch(() => {})
      .finally(() => {
        if (this.queues.get(key) === next) this.queues.delete(key);
      });
    return next;
  }

  /** When tmux last answered `-V`: a spawn asks every time, and a binary that ran a minute ago still runs. */
  private availableAt = Number.NEGATIVE_INFINITY;

  async available(): Promise<boolean> {
    if (Date.now() - this.availableAt < AVAILABLE_CACHE_MS) return true;
    try {
      const ok = (await this.run(undefined, ["-V"])).code === 0;
      if (ok) this.availableAt = Date.now();
      return ok;
    } catch {
      return false;
    }
  }

  async currentSession(): Promise<string | undefined> {
    if (!this.env.TMUX) return undefined;
    // Without -t, tmux would pick the most recently used session, not necessarily the one we run in.
    const target = this.env.TMUX_PANE ? ["-t", this.env.TMUX_PANE] : [];
    try {
      const result = await this.run(undefined, ["display-message", "-p", ...target, "#{session_name}"]);
      const name = result.stdout.replace(/\n$/, "");
      return result.code === 0 && name !== "" ? name : undefined;
    } catch {
      return undefined;
    }
  }

  /** The id (@N) of the team's window, undefined when the session has none; null when the session does not exist. */
  private async findWindow(socket: string | undefined, session: string, window: string) {
    const result = await this.run(socket, [
      "list-windows",
      "-t",
      `=${session}`,
      "-F",
      "#{window_id}\t#{window_name}",
    ]);
    if (result.code !== 0) {
      if (/can't find session|no server running|error connecting|no such file/i.test(result.stderr))
        return null;
      throw new TmuxError(`tmux list-windows failed: ${result.stderr.trim() || `exit ${result.code}`}`);
    }
    for (const line of result.stdout.split("\n")) {
      const [id, name] = line.split("\t");
      if (id && name === window) return id;
    }
    return undefined;
  }

  async openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }> {
    if (spec.command.length === 0) throw new TmuxError("a pane needs a command");
    const key = `${spec.socket ?? ""}\u0000${spec.session}\u0000${spec.window}`;
    return this.serial(key, () => this.openPaneNow(spec));
  }

  private async openPaneNow(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }> {
    const { created, newWindow } = await this.createPane(spec);
    const { paneId, panePid, windowId, server } = parseCreatedPane(created);
    try {
      // One tmux invocation for the whole set-up: each tmux run is a process start, and a spawn is waiting on them.
      await this.must(spec.socket, commandSequence(paneSetup(spec, paneId, windowId, newWindow)));
    } catch (error) {
      // A half-configured pane would still run the command; the caller expects all or nothing. It may lack its
      // @agent_id yet, so only the server it was created on vouches for the id (checked inside tmux, as ifOwned does).
      const sameServer = `#{==:${SERVER_FORMAT},${server}}`;
      await this.run(spec.socket, [
        "if-shell",
        "-F",
        "-t",
        paneId,
        sameServer,
        `kill-pane -t ${paneId}`,
      ]).catch(() => {});
      throw error;
    }
    return { paneId, panePid, server };
  }

  /** Create the pane running the command; tmux's `-P` line about it, and whether its window is new. */
  private async createPane(spec: PaneSpec): Promise<{ created: string; newWindow: boolean }> {
    const format = ["-P", "-F", PANE_FORMAT];
    // tmux runs a multi-word command with execvp, no shell, but hands a lone word to `sh -c`: wrap that one so its
    // characters are never interpreted (exec keeps the pid, so pane_pid stays the program's).
    const command = spec.command.length === 1 ? ["sh", "-c", 'exec "$0"', ...spec.command] : spec.command;
    const cwd = escapeFormat(spec.cwd);
    for (let attempt = 0; ; attempt++) {
      const windowId = await this.findWindow(spec.socket, spec.session, spec.window);
      try {
        const create = createArgs(spec, windowId);
        const created = await this.command(
          spec.socket,
          [...create, "-c", cwd, ...format, "--", ...command],
          spec.env ?? {},
        );
        return { created, newWindow: windowId === null || windowId === undefined };
      } catch (error) {
        // Another process created the session between our look and our create: look again, once.
        if (attempt === 0 && error instanceof TmuxError && /duplicate session/i.test(error.message)) continue;
        throw error;
      }
    }
  }

  async paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown"> {
    let result: RunResult;
    try {
      result = await this.run(ref.socket, ["display-message", "-p", "-t", ref.paneId, OWNER_FORMAT]);
    } catch {
      return "unknown";
    }
    // A missing pane and a server that is not running both mean the pane is gone.
    if (result.code !== 0) return NO_PANE.test(result.stderr) ? "gone" : "unknown";
    const line = parseOwnerLine(result.stdout.replace(/\n$/, ""));
    if (!line) return "unknown";
    // tmux answers for a pane id it no longer has with empty fields, not an error.
    if (line.paneId !== ref.paneId) return "gone";
    const live: LivePanes = { server: line.server, owners: new Map([[line.paneId, line.agentId]]) };
    return ownsLivePane(live, ref) && !line.dead ? "alive" : "gone";
  }

  async livePanes(socket: string | undefined): Promise<LivePanes | undefined> {
    let result: RunResult;
    try {
      result = await this.run(socket, ["list-panes", "-a", "-F", OWNER_FORMAT]);
    } catch {
      return undefined;
    }
    if (result.code !== 0) {
      return NO_SERVER.test(result.stderr) ? { server: undefined, owners: new Map() } : undefined;
    }
    const live: LivePanes = { server: undefined, owners: new Map() };
    for (const text of result.stdout.split("\n")) {
      const line = parseOwnerLine(text);
      if (!line?.paneId) continue;
      live.server = line.server;
      if (!line.dead) live.owners.set(line.paneId, line.agentId);
    }
    return live;
  }

  async findAgentPane(socket: string | undefined, agentId: string): Promise<MarkedPane | undefined> {
    const result = await this.run(socket, [
      "list-panes",
      "-a",
      "-F",
      "#{pane_id} #{pane_pid} #{@agent_id} #{@opencode_session_id}",
    ]);
    if (result.code !== 0) {
      if (NO_SERVER.test(result.stderr)) return undefined;
      throw new TmuxError(`tmux list-panes failed: ${result.stderr.trim() || `exit ${result.code}`}`);
    }
    for (const line of result.stdout.split("\n")) {
      const [paneId, pid, id, sessionId] = line.trim().split(" ");
      if (paneId && id === agentId)
        return { paneId, panePid: Number(pid), sessionId: sessionId || undefined };
    }
    return undefined;
  }

  /**
   * Run `commands` only if the pane is the agent's at that moment; true when they ran. The check and the commands
   * are one `if-shell -F` evaluated inside the tmux server, so a pane id that changes hands between a separate check
   * and the action (a restarted server reuses ids) is never touched.
   */
  private async ifOwned(ref: PaneRef, commands: string[][]): Promise<boolean> {
    const condition = ownershipCondition(ref);
    if (condition === undefined) return false;
    const action = [["display-message", "-p", OWNED_MARK], ...commands]
      .map((command) => command.map(quoteTmuxArg).join(" "))
      .join(" ; ");
    const result = await this.run(ref.socket, ["if-shell", "-F", "-t", ref.paneId, condition, action]);
    if (result.code !== 0 && !NO_PANE.test(result.stderr)) {
      throw new TmuxError(
        `tmux ${commands[0]?.[0]} failed: ${result.stderr.trim() || `exit ${result.code}`}`,
      );
    }
    return result.stdout.split("\n").includes(OWNED_MARK);
  }

  async sendText(ref: PaneRef, text: string): Promise<void> {
    // A paste, not keystrokes: newlines in the text would otherwise submit it line by line. The buffer is loaded from
    // stdin so the text never shows in argv and has no length limit.
    const buffer = `oct-${randomBytes(6).toString("hex")}`;
    await this.must(ref.socket, ["load-buffer", "-b", buffer, "-"], text);
    let pasted = false;
    try {
      pasted = await this.ifOwned(ref, [
        ["paste-buffer", "-p", "-d", "-b", buffer, "-t", ref.paneId],
        ["send-keys", "-t", ref.paneId, "Enter"],
      ]);
    } finally {
      if (!pasted) await this.run(ref.socket, ["delete-buffer", "-b", buffer]).catch(() => {});
    }
    if (!pasted) {
      throw new TmuxError(
        `pane ${ref.paneId} is gone or no longer this agent's (tmux reuses pane ids after a restart); nothing was typed`,
      );
    }
  }

  async closePane(ref: PaneRef, options: { interrupt?: boolean } = {}): Promise<void> {
    if ((await this.paneState(ref)) === "gone") return;
    if (options.interrupt !== false) {
      // `opencode attach` may ignore SIGHUP: interrupt it first, then remove the pane.
      if (!(await this.ifOwned(ref, [["send-keys", "-t", ref.paneId, "C-c"]]))) return;
      await Bun.sleep(100);
    }
    let failure = "";
    try {
      if (!(await this.ifOwned(ref, [["kill-pane", "-t", ref.paneId]]))) return;
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
    }
    for (let i = 0; i < 20; i++) {
      const state = await this.paneState(ref);
      if (state === "gone") return;
      if (state === "unknown" && failure) break;
      await Bun.sleep(50);
    }
    throw new TmuxError(
      `tmux kill-pane ${ref.paneId} did not remove the pane${failure ? `: ${failure}` : ""}`,
    );
  }
}

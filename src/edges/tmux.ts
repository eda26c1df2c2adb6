import { randomBytes } from "node:crypto";
import {
  type LivePanes,
  type MarkedPane,
  ownsLivePane,
  type PaneRef,
  type PaneSpec,
  type TmuxApi,
} from "./tmux-api.ts";
import { createPane, paneSetup, parseCreatedPane } from "./tmux-new-pane.ts";
import {
  OWNED_MARK,
  OWNER_FORMAT,
  ownershipCondition,
  parseOwnerLine,
  SERVER_FORMAT,
} from "./tmux-ownership.ts";
import { type RunResult, TmuxError, TmuxRunner } from "./tmux-run.ts";
import { commandSequence, quoteTmuxArg } from "./tmux-syntax.ts";

const NO_PANE = /can't find|no server running|not found|error connecting|no such file/i;
/** What tmux says when the server a socket names is not running: no panes there, rather than a failure. */
const NO_SERVER = /no server running|error connecting|no such file/i;

const AVAILABLE_CACHE_MS = 60_000;

/**
 * TmuxApi over the tmux binary. Commands go to tmux as argv (no shell); a command carrying environment values
 * (secrets) is written to `tmux source-file -` on stdin instead, so no value ever appears in a process's argv.
 */
export class TmuxCli implements TmuxApi {
  /** Window creation per (socket, session, window) is serialised so concurrent spawns make one window, not five. */
  private readonly queues = new Map<string, Promise<unknown>>();

  private readonly tmux: TmuxRunner;

  constructor(
    binary = "tmux",
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.tmux = new TmuxRunner(binary, env);
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
      const ok = (await this.tmux.run(undefined, ["-V"])).code === 0;
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
      const result = await this.tmux.run(undefined, ["display-message", "-p", ...target, "#{session_name}"]);
      const name = result.stdout.replace(/\n$/, "");
      return result.code === 0 && name !== "" ? name : undefined;
    } catch {
      return undefined;
    }
  }

  async openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }> {
    if (spec.command.length === 0) throw new TmuxError("a pane needs a command");
    const key = `${spec.socket ?? ""}\u0000${spec.session}\u0000${spec.window}`;
    return this.serial(key, () => this.openPaneNow(spec));
  }

  private async openPaneNow(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }> {
    const { created, newWindow } = await createPane(this.tmux, spec);
    const { paneId, panePid, windowId, server } = parseCreatedPane(created);
    try {
      // One tmux invocation for the whole set-up: each tmux run is a process start, and a spawn is waiting on them.
      await this.tmux.must(spec.socket, commandSequence(paneSetup(spec, paneId, windowId, newWindow)));
    } catch (error) {
      // A half-configured pane would still run the command; the caller expects all or nothing. It may lack its
      // @agent_id yet, so only the server it was created on vouches for the id (checked inside tmux, as ifOwned does).
      const sameServer = `#{==:${SERVER_FORMAT},${server}}`;
      await this.tmux
        .run(spec.socket, ["if-shell", "-F", "-t", paneId, sameServer, `kill-pane -t ${paneId}`])
        .catch(() => {});
      throw error;
    }
    return { paneId, panePid, server };
  }

  async paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown"> {
    let result: RunResult;
    try {
      result = await this.tmux.run(ref.socket, ["display-message", "-p", "-t", ref.paneId, OWNER_FORMAT]);
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
      result = await this.tmux.run(socket, ["list-panes", "-a", "-F", OWNER_FORMAT]);
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
    const result = await this.tmux.run(socket, [
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
    const result = await this.tmux.run(ref.socket, ["if-shell", "-F", "-t", ref.paneId, condition, action]);
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
    await this.tmux.must(ref.socket, ["load-buffer", "-b", buffer, "-"], text);
    let pasted = false;
    try {
      pasted = await this.ifOwned(ref, [
        ["paste-buffer", "-p", "-d", "-b", buffer, "-t", ref.paneId],
        ["send-keys", "-t", ref.paneId, "Enter"],
      ]);
    } finally {
      if (!pasted) await this.tmux.run(ref.socket, ["delete-buffer", "-b", buffer]).catch(() => {});
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

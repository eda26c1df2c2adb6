/**
 * tmux helpers for end-to-end tests. Every call goes to a PRIVATE server (`tmux -L <socket>`): tests never touch the
 * user's default tmux server. Create a name with `tmuxSocketName()`, hand it to the plugin (e.g. the `tmuxSocket`
 * plugin option), and `killServer(socket)` in afterAll.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";

export interface TmuxResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface PaneInfo {
  sessionName: string;
  windowIndex: number;
  windowName: string;
  paneId: string;
  panePid: number;
  paneDead: boolean;
  currentCommand: string;
  title: string;
}

const created = new Set<string>();

export function hasTmux(): boolean {
  return spawnSync("tmux", ["-V"], { stdio: "ignore" }).status === 0;
}

/** A fresh socket name, unique per process and call: `oc-e2e-<pid>-<random>`. */
export function tmuxSocketName(prefix = "oc-e2e"): string {
  const name = `${prefix}-${process.pid}-${randomBytes(4).toString("hex")}`;
  created.add(name);
  return name;
}

/** Run `tmux -L <socket> ...args` synchronously. Never throws for a non-zero exit; check `code`. */
export function tmux(socket: string, args: string[]): TmuxResult {
  if (socket === "") throw new Error("tmux(): a private socket name is required");
  // TMUX/TMUX_PANE would make tmux talk to the server the tests run inside; -L alone is enough without them.
  const env = { ...process.env };
  delete env.TMUX;
  delete env.TMUX_PANE;
  const r = spawnSync("tmux", ["-L", socket, ...args], { encoding: "utf8", env });
  return { code: r.status ?? -1, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

/** True when a tmux server is running on this socket. */
export function serverRunning(socket: string): boolean {
  return tmux(socket, ["list-sessions"]).code === 0;
}

/** Kill the private server (no-op when none runs). */
export function killServer(socket: string): void {
  tmux(socket, ["kill-server"]);
  created.delete(socket);
}

/** Kill every private server whose name this process generated. */
export function killAllServers(): void {
  for (const s of [...created]) killServer(s);
}

const PANE_FORMAT = [
  "#{session_name}",
  "#{window_index}",
  "#{window_name}",
  "#{pane_id}",
  "#{pane_pid}",
  "#{pane_dead}",
  "#{pane_current_command}",
  "#{pane_title}",
].join("\t");

/** All panes of all sessions on the socket; [] when no server runs. */
export function listPanes(socket: string): PaneInfo[] {
  const r = tmux(socket, ["list-panes", "-a", "-F", PANE_FORMAT]);
  if (r.code !== 0) return [];
  return r.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((line) => {
      const [
        sessionName = "",
        windowIndex = "0",
        windowName = "",
        paneId = "",
        panePid = "0",
        dead = "0",
        cmd = "",
        title = "",
      ] = line.split("\t");
      return {
        sessionName,
        windowIndex: Number(windowIndex),
        windowName,
        paneId,
        panePid: Number(panePid),
        paneDead: dead === "1",
        currentCommand: cmd,
        title,
      };
    });
}

/** Visible text of a pane (for diagnostics; decide liveness from processes, not from pane text). */
export function capturePane(socket: string, paneId: string): string {
  return tmux(socket, ["capture-pane", "-p", "-t", paneId]).stdout;
}

// The tmux commands that make an agent's pane and set it up, and the reading of tmux's answer about the new pane.
import type { PaneSpec } from "./tmux-api.ts";
import { SERVER_FORMAT } from "./tmux-ownership.ts";
import { TmuxError, type TmuxRunner } from "./tmux-run.ts";
import { escapeFormat } from "./tmux-syntax.ts";

/** Size of a detached team session before anyone attaches: tmux's 80x24 default leaves no room for several panes. */
const DETACHED_WIDTH = 240;
const DETACHED_HEIGHT = 64;
const PANE_FORMAT = `#{pane_id}\t#{pane_pid}\t#{window_id}\t${SERVER_FORMAT}`;
/** Pane titles can be overwritten by the program in the pane (OSC 2), so the border prefers our own option. */
const BORDER_FORMAT = " #{?#{@agent_name},#{@agent_name},#{pane_title}} ";

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
export function parseCreatedPane(created: string): {
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
export function paneSetup(spec: PaneSpec, paneId: string, windowId: string, newWindow: boolean): string[][] {
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

/** The id (@N) of the team's window, undefined when the session has none; null when the session does not exist. */
async function findWindow(tmux: TmuxRunner, socket: string | undefined, session: string, window: string) {
  const result = await tmux.run(socket, [
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

/** Create the pane running the command; tmux's `-P` line about it, and whether its window is new. */
export async function createPane(
  tmux: TmuxRunner,
  spec: PaneSpec,
): Promise<{ created: string; newWindow: boolean }> {
  const format = ["-P", "-F", PANE_FORMAT];
  // tmux runs a multi-word command with execvp, no shell, but hands a lone word to `sh -c`: wrap that one so its
  // characters are never interpreted (exec keeps the pid, so pane_pid stays the program's).
  const command = spec.command.length === 1 ? ["sh", "-c", 'exec "$0"', ...spec.command] : spec.command;
  const cwd = escapeFormat(spec.cwd);
  for (let attempt = 0; ; attempt++) {
    const windowId = await findWindow(tmux, spec.socket, spec.session, spec.window);
    try {
      const create = createArgs(spec, windowId);
      const created = await tmux.command(
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

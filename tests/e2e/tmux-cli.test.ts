/**
 * TmuxCli against real tmux on a private socket: hostile names and directories, window reuse, concurrency, env values
 * kept out of argv, the paste fallback, and closing. No OpenCode involved; runs in a few seconds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pidAlive } from "../../src/edges/process.ts";
import { processRunning } from "../../src/edges/process-info.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { hasTmux, killServer, listPanes, tmux, tmuxSocketName } from "./harness/tmux.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const HOSTILE = `we ird $HOME;'q"\`x\` #{pane_id}#(touch PWNED) ##`;
const AGENT_ID = "0f4e8c2a-7b1d-4e5f-8a9b-3c2d1e0f4a5b";

async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("timed out");
    await Bun.sleep(50);
  }
}

describe.skipIf(!hasTmux())("TmuxCli on real tmux", () => {
  let socket: string;
  let root: string;
  let dir: string;
  const cli = new TmuxCli();

  beforeAll(() => {
    socket = tmuxSocketName("oct-tmuxcli");
    root = realpathSync(mkdtempSync(path.join(tmpdir(), "oct-tmux-")));
    dir = path.join(root, HOSTILE);
    mkdirSync(dir, { recursive: true });
  });

  afterAll(() => {
    killServer(socket);
    removeSocketFile(socket);
    rmSync(root, { recursive: true, force: true });
  });

  test("available() is false for a missing binary, true for tmux", async () => {
    expect(await new TmuxCli("/nonexistent/tmux").available()).toBe(false);
    expect(await cli.available()).toBe(true);
  });

  test("a pane in a new detached session: cwd, title, options and env survive hostile characters", async () => {
    const out = path.join(root, "out-1");
    const secret = `s3 cr'e"t $PATH \\ ; #{pane_id}`;
    const { paneId, panePid } = await cli.openPane({
      socket,
      session: "teams-alpha",
      window: "team-alpha",
      cwd: dir,
      command: ["sh", "-c", `pwd > '${out}.cwd'; printf %s "$SECRET" > '${out}.env'; exec sleep 300`],
      env: { SECRET: secret },
      title: `title ${HOSTILE}`,
      // Values ending in ";" would split the one tmux invocation that sets the pane up, were they not escaped.
      options: {
        agent_id: `id ${HOSTILE}`,
        opencode_session_id: "ses_1",
        agent_name: "fix;",
        team_name: "a\\;",
      },
    });
    expect(paneId).toMatch(/^%\d+$/);
    expect(pidAlive(panePid)).toBe(true);
    await waitFor(() => existsSync(`${out}.env`) && existsSync(`${out}.cwd`));
    await Bun.sleep(50);
    expect(readFileSync(`${out}.cwd`, "utf8").trim()).toBe(dir);
    expect(readFileSync(`${out}.env`, "utf8")).toBe(secret);
    expect(existsSync(path.join(dir, "PWNED"))).toBe(false);
    expect(existsSync(path.join(root, "PWNED"))).toBe(false);
    const show = (format: string) =>
      tmux(socket, ["display-message", "-p", "-t", paneId, format]).stdout.trim();
    expect(show("#{pane_title}")).toBe(`title ${HOSTILE}`);
    expect(show("#{@agent_id}")).toBe(`id ${HOSTILE}`);
    expect(show("#{@opencode_session_id}")).toBe("ses_1");
    expect(show("#{@agent_name}")).toBe("fix;");
    expect(show("#{@team_name}")).toBe("a\\;");
    expect(show("#{session_name}:#{window_name}")).toBe("teams-alpha:team-alpha");
    expect(show("#{pane_pid}")).toBe(String(panePid));
    // The secret went to tmux on stdin, so the pane's start command (what tmux shows) never contains it.
    expect(show("#{pane_start_command}")).not.toContain("s3 cr");
    expect(await cli.paneState({ socket, paneId, agentId: `id ${HOSTILE}` })).toBe("alive");
  });

  test("later panes split the team's window; other windows are left alone", async () => {
    tmux(socket, ["new-window", "-d", "-t", "=teams-alpha:", "-n", "users-own", "--", "sleep", "300"]);
    const a = await cli.openPane({
      socket,
      session: "teams-alpha",
      window: "team-alpha",
      cwd: root,
      command: ["sleep", "300"],
      title: "second",
    });
    const panes = listPanes(socket);
    expect(panes.filter((p) => p.windowName === "team-alpha").map((p) => p.paneId)).toContain(a.paneId);
    expect(panes.filter((p) => p.windowName === "team-alpha")).toHaveLength(2);
    expect(panes.filter((p) => p.windowName === "users-own")).toHaveLength(1);
    // A new team gets its own window in an existing session rather than splitting someone else's.
    const b = await cli.openPane({
      socket,
      session: "teams-alpha",
      window: "team-beta",
      cwd: root,
      command: ["sleep", "300"],
      title: "beta",
    });
    expect(listPanes(socket).find((p) => p.paneId === b.paneId)?.windowName).toBe("team-beta");
  });

  test("five concurrent panes into a fresh session: one session, one window, five panes", async () => {
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        cli.openPane({
          socket,
          session: "teams-gamma",
          window: "team-gamma",
          cwd: root,
          command: ["sleep", "300"],
          title: `worker-${i}`,
        }),
      ),
    );
    expect(new Set(results.map((r) => r.paneId)).size).toBe(5);
    const panes = listPanes(socket).filter((p) => p.sessionName === "teams-gamma");
    expect(panes).toHaveLength(5);
    expect(new Set(panes.map((p) => p.windowName))).toEqual(new Set(["team-gamma"]));
  });

  test("two TmuxCli instances (two processes' worth) racing on a fresh session still make one session", async () => {
    const other = new TmuxCli();
    const [a, b] = await Promise.all([
      cli.openPane({
        socket,
        session: "teams-delta",
        window: "w",
        cwd: root,
        command: ["sleep", "300"],
        title: "a",
      }),
      other.openPane({
        socket,
        session: "teams-delta",
        window: "w",
        cwd: root,
        command: ["sleep", "300"],
        title: "b",
      }),
    ]);
    const panes = listPanes(socket).filter((p) => p.sessionName === "teams-delta");
    expect(panes.map((p) => p.paneId).sort()).toEqual([a.paneId, b.paneId].sort());
    // Two windows named "w" can happen when both create the window at once; what matters is that both panes exist.
    expect(panes.every((p) => p.windowName === "w")).toBe(true);
  });

  test("a single-word command runs without a shell interpreting it", async () => {
    const script = path.join(root, "run me;$(touch PWNED2).sh");
    await Bun.write(script, `#!/bin/sh\necho ok > '${root}/single.out'\nexec sleep 300\n`);
    const { chmodSync } = await import("node:fs");
    chmodSync(script, 0o755);
    await cli.openPane({
      socket,
      session: "teams-eps",
      window: "w",
      cwd: root,
      command: [script],
      title: "x",
    });
    await waitFor(() => existsSync(path.join(root, "single.out")));
    expect(existsSync(path.join(root, "PWNED2"))).toBe(false);
  });

  test("sendText pastes multi-line text with quotes and $ literally, then Enter", async () => {
    const out = path.join(root, "typed.out");
    const { paneId } = await cli.openPane({
      socket,
      session: "teams-alpha",
      window: "team-typing",
      cwd: root,
      command: ["sh", "-c", `stty -echo; cat > '${out}'`],
      title: "typing",
      options: { agent_id: AGENT_ID },
    });
    await Bun.sleep(200);
    const text = `line one $HOME "q" 'q' \`x\`\nline two; #{pane_id}`;
    await cli.sendText({ socket, paneId, agentId: AGENT_ID }, text);
    await waitFor(
      () =>
        existsSync(out) &&
        readFileSync(out, "utf8").endsWith("\n") &&
        readFileSync(out, "utf8").includes("two"),
    );
    expect(readFileSync(out, "utf8")).toBe(`${text}\n`);
  });

  test("closePane removes the pane and its process; gone panes and a stopped server read as gone", async () => {
    const { paneId, panePid } = await cli.openPane({
      socket,
      session: "teams-alpha",
      window: "team-alpha",
      cwd: root,
      command: ["sleep", "300"],
      title: "doomed",
      options: { agent_id: AGENT_ID },
    });
    const ref = { socket, paneId, agentId: AGENT_ID };
    await cli.closePane(ref);
    expect(await cli.paneState(ref)).toBe("gone");
    // Dead, not reaped: on a loaded machine tmux was seen leaving the killed process a zombie for over 5 s, which
    // a signal probe (pidAlive) still counts as alive.
    await waitFor(() => !processRunning(panePid));
    expect(await cli.paneState({ ...ref, paneId: "%9999" })).toBe("gone");
    await cli.closePane(ref); // idempotent
    expect(await cli.paneState({ ...ref, socket: `${socket}-never-started`, paneId: "%1" })).toBe("gone");
  });

  test("currentSession() names the session of $TMUX_PANE; undefined outside tmux", async () => {
    expect(await new TmuxCli("tmux", {}).currentSession()).toBeUndefined();
    const pane = listPanes(socket).find((p) => p.sessionName === "teams-gamma");
    if (!pane) throw new Error("no pane");
    const socketPath = tmux(socket, ["display-message", "-p", "#{socket_path}"]).stdout.trim();
    const inside = new TmuxCli("tmux", { ...process.env, TMUX: `${socketPath},1,0`, TMUX_PANE: pane.paneId });
    expect(await inside.currentSession()).toBe("teams-gamma");
  });
});

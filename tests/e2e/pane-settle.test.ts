/**
 * confirmPaneStarted on real tmux (private socket): a pane whose command cannot start is a failure; one whose process
 * already runs `attach` on the session is believed early; anything else must stay up for the whole settle time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { systemClock } from "../../src/clock.ts";
import { hostProcesses } from "../../src/edges/process-info.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import {
  type AgentPane,
  confirmPaneStarted,
  DEFAULT_PANE_TIMING,
} from "../../src/operations/agents/agent-pane.ts";
import type { PaneTiming, TeamsContext } from "../../src/operations/context.ts";
import { hasTmux, killServer, tmuxSocketName } from "./harness/tmux.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const SESSION_ID = "ses_settle_test";
const AGENT_ID = "5b0c3f6e-4d1a-4c7e-9a52-1f3e2d4c5b6a";

describe.skipIf(!hasTmux())("confirmPaneStarted on real tmux", () => {
  let socket: string;
  let root: string;
  const cli = new TmuxCli();
  // confirmPaneStarted asks tmux, the processes and the clock only; the rest of the context is not used.
  const ctx = {
    clock: systemClock,
    edges: { tmux: cli, processes: hostProcesses },
  } as unknown as TeamsContext;
  const timing = (set: Partial<PaneTiming>) => {
    ctx.paneTiming = { ...DEFAULT_PANE_TIMING, ...set };
  };

  const placement = () => ({ socket, session: "settle", window: "settle" });

  beforeAll(async () => {
    socket = tmuxSocketName("oct-settle");
    root = realpathSync(mkdtempSync(path.join(tmpdir(), "oct-settle-")));
    // Keeps the window (and the tmux server) up while the panes under test come and go.
    await cli.openPane({ ...placement(), cwd: root, command: ["sleep", "600"], title: "anchor" });
  });
  afterAll(() => {
    killServer(socket);
    removeSocketFile(socket);
    rmSync(root, { recursive: true, force: true });
  });

  async function open(command: string[]): Promise<AgentPane> {
    const openedAt = Date.now();
    const { paneId, panePid, server } = await cli.openPane({
      ...placement(),
      cwd: root,
      command,
      title: "settle",
      options: { agent_id: AGENT_ID },
    });
    return {
      agentId: AGENT_ID,
      paneId,
      attachPid: panePid,
      placement: { ...placement(), server },
      openedAt,
      command: command[0] ?? "",
    };
  }

  test("a command that dies before the settle time is a pane failure naming it", async () => {
    timing({ settleMs: 1_500 });
    const pane = await open(["sh", "-c", "sleep 0.3; exit 1"]);
    await expect(confirmPaneStarted(ctx, pane, SESSION_ID)).rejects.toThrow(
      "the pane's command exited right away; is 'sh' a runnable opencode binary?",
    );
  });

  test("a program called with attach arguments that is gone by execSettleMs is a failure too", async () => {
    timing({ settleMs: 1_500, execSettleMs: 600 });
    const pane = await open(["sh", "-c", "sleep 0.3; exit 1", "attach", "--session", SESSION_ID]);
    await expect(confirmPaneStarted(ctx, pane, SESSION_ID)).rejects.toThrow("exited right away");
  });

  test("a process running attach on the session is believed after execSettleMs, not the whole settle time", async () => {
    timing({ settleMs: 20_000 });
    const pane = await open([
      process.execPath,
      "-e",
      "setTimeout(() => {}, 30000)",
      "attach",
      "--session",
      SESSION_ID,
    ]);
    const started = Date.now();
    await confirmPaneStarted(ctx, pane, SESSION_ID);
    // Far below the 20 s the fallback would wait: the early path was taken.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  test("a process that is not our attach must stay up for the whole settle time", async () => {
    timing({ settleMs: 700 });
    const pane = await open(["sleep", "30"]);
    await confirmPaneStarted(ctx, pane, SESSION_ID);
    expect(Date.now() - pane.openedAt).toBeGreaterThanOrEqual(700);
  });
});

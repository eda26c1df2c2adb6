/**
 * A pane id is not an identity: tmux numbers panes from %0 again when its server restarts (reboot, kill-server), so
 * a recorded agent pane can name the user's own pane. Real tmux on a private socket: after a restart the user's pane
 * holds the agent's old id, and nothing we do for that agent may read it as the agent's or touch it.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import {
  childPids,
  processCommandLine,
  processRunning,
  terminateProcess,
} from "../../src/edges/process-info.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { ownsLivePane, type PaneRef } from "../../src/edges/tmux-api.ts";
import {
  type AgentPane,
  agentPaneRef,
  closeAgentPane,
  DEFAULT_PANE_TIMING,
  openAgentPane,
  paneOwner,
} from "../../src/operations/agents/agent-pane.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { capturePane, hasTmux, killServer, listPanes, tmux, tmuxSocketName } from "../e2e/harness/tmux.ts";
import { removeSocketFile } from "../e2e/tmux-socket-file.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

const SESSION_ID = "ses_owned_pane";

async function waitFor(fn: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await Bun.sleep(10);
  }
}

describe.skipIf(!hasTmux())("a pane id reused by a restarted tmux server is never the agent's", () => {
  let socket: string;
  let ctx: TestContext;
  const cli = new TmuxCli();
  let agentId: string;
  let pane: AgentPane;
  let ref: PaneRef;
  /** The user's pane after the restart: its pid, and the file its shell writes a line to on each C-c. */
  let user: { paneId: string; pid: number; interrupts: string };

  beforeAll(() => {
    socket = tmuxSocketName("oct-owner");
  });
  afterAll(() => {
    killServer(socket);
    removeSocketFile(socket);
  });

  beforeEach(async () => {
    ctx = await makeTestContext({ tmuxSocket: socket });
    ctx.paneTiming = DEFAULT_PANE_TIMING;
    ctx.edges.tmux = cli;
    const fakeAttach = path.join(ctx.projectRoot, "fake-opencode");
    await writeFile(fakeAttach, "#!/bin/sh\nexec sleep 600\n", { mode: 0o755 });
    ctx.edges.opencodeBinary = () => fakeAttach;
    const team = await createTeam(ctx, { teamName: "alpha" }, "ses_leader");
    if (!team.success) throw new Error(team.error);
    agentId = uuidv4();
    killServer(socket);
    pane = await openAgentPane(ctx, {
      teamName: "alpha",
      agentId,
      name: "worker",
      role: "worker",
      color: "blue",
      sessionId: SESSION_ID,
      cwd: ctx.projectRoot,
      serverUrl: "http://127.0.0.1:1",
    });
    ref = agentPaneRef(paneOwner(SESSION_ID, pane));
    expect(await cli.paneState(ref)).toBe("alive");

    // The server restarts (reboot, kill-server); the user's first pane on the new one gets the agent's old id.
    killServer(socket);
    const interrupts = path.join(ctx.projectRoot, "user-interrupts");
    const newServer = () =>
      tmux(socket, [
        "new-session",
        "-d",
        "-s",
        "users-own",
        "-P",
        "-F",
        "#{pane_id} #{pane_pid}",
        "--",
        "sh",
        "-c",
        `trap 'echo INT >> "$0"' INT; while :; do sleep 0.1; done`,
        interrupts,
      ]);
    // kill-server returns before the old server has let go of its socket: retry until the new one answers.
    let started = newServer();
    for (let i = 0; i < 50 && started.code !== 0; i++) {
      await Bun.sleep(50);
      started = newServer();
    }
    if (started.code !== 0) throw new Error(`new tmux server: ${started.stderr}`);
    const [paneId = "", pid = "0"] = started.stdout.trim().split(" ");
    user = { paneId, pid: Number(pid), interrupts };
    expect(user.paneId).toBe(pane.paneId);
  });

  afterEach(async () => {
    killServer(socket);
    await ctx.cleanup();
  });

  const userPaneUntouched = () => {
    const live = listPanes(socket).find((p) => p.paneId === user.paneId);
    expect(live?.panePid).toBe(user.pid);
    expect(existsSync(user.interrupts) ? readFileSync(user.interrupts, "utf8") : "").toBe("");
  };

  test("paneState and livePanes call the agent's pane gone", async () => {
    expect(await cli.paneState(ref)).toBe("gone");
    const live = await cli.livePanes(socket);
    expect(live && ownsLivePane(live, ref)).toBe(false);
    // The pane with that id is listed all the same: it is the user's.
    expect(live?.owners.get(user.paneId)).toBe("");
  });

  test("closeAgentPane sends the user's pane no C-c and does not kill it", async () => {
    const warnings = await closeAgentPane(ctx, paneOwner(SESSION_ID, pane));
    expect(warnings).toEqual([]);
    await Bun.sleep(300);
    userPaneUntouched();
  });

  test("sendText refuses and types nothing into the user's pane", async () => {
    await expect(cli.sendText(ref, "rm -rf ~/important")).rejects.toThrow("no longer this agent's");
    await Bun.sleep(300);
    expect(capturePane(socket, user.paneId)).not.toContain("important");
    // No pasted text left behind in a tmux buffer either.
    expect(tmux(socket, ["list-buffers"]).stdout).toBe("");
    userPaneUntouched();
  });

  test("a record without the server identity (older files): the @agent_id check alone still refuses", async () => {
    const { server: _server, ...legacy } = ref;
    expect(await cli.paneState(legacy)).toBe("gone");
    await closeAgentPane(ctx, {
      ...paneOwner(SESSION_ID, pane),
      tmux: { ...pane.placement, server: undefined },
    });
    await expect(cli.sendText(legacy, "hello")).rejects.toThrow();
    await Bun.sleep(300);
    userPaneUntouched();
  });

  test("the action checks ownership itself: a check passed just before the id changed hands touches nothing", async () => {
    // Stands in for a pane that was the agent's when looked at and the user's by the time C-c and kill-pane run.
    class CheckedTooEarly extends TmuxCli {
      override async paneState(): Promise<"alive"> {
        return "alive";
      }
    }
    await new CheckedTooEarly().closePane(ref);
    await Bun.sleep(300);
    userPaneUntouched();
  });
});

describe("the attach process is signalled only while it is ours", () => {
  /** Processes these tests started, with the command line each had, so cleanup stops only those. */
  const spawned: { pid: number; argv: string[] }[] = [];
  afterEach(async () => {
    for (const { pid, argv } of spawned.splice(0)) {
      await terminateProcess(
        pid,
        100,
        async () => JSON.stringify(await processCommandLine(pid)) === JSON.stringify(argv),
      );
    }
  });

  async function closeWithAttach(children: number, script: string, ...args: string[]) {
    const ctx = await makeTestContext();
    ctx.paneTiming = { ...DEFAULT_PANE_TIMING, exitGraceMs: 50 };
    const argv = ["sh", "-c", script, ...args, "attach", "--session", SESSION_ID];
    const attach = Bun.spawn(argv, { stdio: ["ignore", "ignore", "ignore"] });
    spawned.push({ pid: attach.pid, argv }, { pid: attach.pid, argv: ["sleep", "300"] });
    try {
      await waitFor(async () => (await childPids(attach.pid)).length >= children);
      await closeAgentPane(ctx, { agentId: uuidv4(), sessionId: SESSION_ID, attachPid: attach.pid });
    } finally {
      await ctx.cleanup();
    }
    return attach.pid;
  }

  test("a pid that stops being our attach after SIGTERM gets no SIGKILL", async () => {
    // On SIGTERM the process becomes another program under the same pid, as a reused pid would be.
    const pid = await closeWithAttach(1, `trap 'exec sleep 300' TERM; while :; do sleep 0.05; done`);
    expect(processRunning(pid)).toBe(true);
    expect(await processCommandLine(pid)).toEqual(["sleep", "300"]);
  });

  test("a listed child whose parent is no longer our attach is not signalled", async () => {
    const pidFile = path.join(tmpdir(), `oct-orphan-${process.pid}-${Date.now()}`);
    // A child that ignores SIGTERM, and an attach that exits once its other child (sleep 2) is terminated: when its
    // SIGKILL would be due, the first child is an orphan that nothing ties to our attach any more.
    const pid = await closeWithAttach(
      2,
      `(trap '' TERM; exec sh -c 'echo $$ > "$1"; exec sleep 300' child "$0") & sleep 2; exit 0`,
      pidFile,
    );
    const orphan = Number(readFileSync(pidFile, "utf8").trim());
    rmSync(pidFile, { force: true });
    spawned.push({ pid: orphan, argv: ["sleep", "300"] });
    expect(processRunning(pid)).toBe(false);
    expect(processRunning(orphan)).toBe(true);
  });
});

describe("the sweep and kill-agent, on the fake tmux", () => {
  let ctx: TestContext;
  beforeEach(async () => ({ ctx } = await mockModelTeamContext("ses_leader")));
  afterEach(() => ctx.cleanup());

  /** An agent with a pane as spawn leaves it, then a tmux restart that gives its pane id to a pane of the user's. */
  async function agentWhosePaneIdWasReused() {
    const agentId = uuidv4();
    const spec = { session: "s", window: "w", cwd: "/", command: ["x"], title: "worker" };
    const opened = await ctx.tmux.openPane({ ...spec, options: { agent_id: agentId } });
    const session = ctx.server.addSession({ title: "worker" });
    const agent = await addAgent(ctx, "alpha", {
      agentId,
      sessionId: session.id,
      headless: false,
      paneId: opened.paneId,
      tmux: { session: "s", window: "w", server: opened.server },
    });
    const sweeper = new StaleSweeper(ctx);
    expect((await sweeper.sweep()).inactive).toEqual([]);
    ctx.tmux.restartServer();
    const users = await ctx.tmux.openPane({ ...spec, title: "my shell" });
    expect(users.paneId).toBe(opened.paneId);
    const userPane = ctx.tmux.panes.get(users.paneId);
    if (!userPane) throw new Error("no user pane");
    return { agent, sweeper, userPane };
  }

  test("the sweep declares the agent inactive (pane_gone) and sends nothing to the pane", async () => {
    const { agent, sweeper, userPane } = await agentWhosePaneIdWasReused();
    ctx.clock.advance(ctx.options.sweepIntervalMs);
    const report = await sweeper.sweep();
    expect(report.inactive.map((i) => [i.agent.agentId, i.cause])).toEqual([[agent.agentId, "pane_gone"]]);
    expect(userPane).toMatchObject({ alive: true, typed: [], interrupts: 0 });
  });

  test("kill-agent ends the agent and leaves the user's pane alone", async () => {
    const { agent, userPane } = await agentWhosePaneIdWasReused();
    const result = await toolCaller(ctx)<{ success: boolean }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId, force: true },
      "ses_leader",
    );
    expect(result.success).toBe(true);
    expect(userPane).toMatchObject({ alive: true, typed: [], interrupts: 0 });
    expect(ctx.tmux.closedWithoutInterrupt).toEqual([]);
  });
});

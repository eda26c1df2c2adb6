/**
 * The check that a new pane's command started, run after spawn-agent has returned, on real tmux (private socket) with
 * the default pane timings: a pane whose program exits at once (a broken opencode binary) makes its agent inactive,
 * and the leader's notice, delivered into the leader's session, says why. The OpenCode servers are fakes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { systemClock } from "../../src/clock.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { DEFAULT_PANE_TIMING } from "../../src/operations/agents/agent-pane.ts";
import { checkPaneStartLater, paneChecksSettled } from "../../src/operations/agents/pane-start-check.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { agentOnDisk, leaderInbox, leadTeam } from "../helpers/team.ts";
import { hasTmux, killServer, tmux, tmuxSocketName } from "./harness/tmux.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

describe.skipIf(!hasTmux())("the pane start check on real tmux", () => {
  let socket: string;
  let root: string;
  let ctx: TestContext;

  beforeAll(async () => {
    socket = tmuxSocketName("oct-panestart");
    root = realpathSync(mkdtempSync(path.join(tmpdir(), "oct-panestart-")));
    ctx = await makeTestContext();
    ctx.clock.set(Date.now());
    ctx.edges.tmux = new TmuxCli();
    // Keeps the window (and the tmux server) up while the pane under test comes and goes.
    tmux(socket, ["new-session", "-d", "-s", "team", "-n", "team", "sleep 600"]);
  });

  afterAll(async () => {
    killServer(socket);
    removeSocketFile(socket);
    rmSync(root, { recursive: true, force: true });
    await ctx.cleanup();
  });

  test("a broken opencode binary: the agent becomes inactive and the leader is told it is not runnable", async () => {
    const { leaderSession } = await leadTeam(ctx);
    const bogus = path.join(root, "bogus-opencode");
    // It lives long enough for tmux to finish setting its pane up (one that exits sooner fails the opening itself),
    // as a process that no longer runs `attach` (the check would believe that one early).
    writeFileSync(bogus, "#!/bin/sh\nexec sh -c 'sleep 0.05; exit 3'\n");
    chmodSync(bogus, 0o755);
    const agentId = uuidv4();
    const session = ctx.server.addSession({ activity: "busy" });
    const placement = { socket, session: "team", window: "team" };
    const openedAt = Date.now();
    const opened = await ctx.edges.tmux.openPane({
      ...placement,
      cwd: root,
      command: [bogus, "attach", "http://127.0.0.1:1", "--session", session.id],
      title: "broken (worker)",
      options: { agent_id: agentId },
    });
    const agent = await addAgent(ctx, "alpha", {
      agentId,
      name: "broken",
      sessionId: session.id,
      headless: false,
      paneId: opened.paneId,
      attachPid: opened.panePid,
      tmux: { ...placement, server: opened.server },
    });
    const pane = {
      agentId,
      paneId: opened.paneId,
      attachPid: opened.panePid,
      placement: { ...placement, server: opened.server },
      openedAt,
      command: bogus,
    };
    // This test is about the real settle time: the check gets the real clock and the default timings.
    const live = { ...ctx, clock: systemClock, paneTiming: DEFAULT_PANE_TIMING };
    checkPaneStartLater(live, {
      teamName: "alpha",
      agentId,
      name: "broken",
      sessionId: session.id,
      pane,
    });
    await paneChecksSettled(live);

    const state = await agentOnDisk(ctx, agent);
    expect(state.status).toBe("inactive");
    const reason = `its tmux pane ${opened.paneId} closed as it opened: the pane's command exited right away; is '${bogus}' a runnable opencode binary?`;
    expect(state.statusReason).toBe(reason);
    const inbox = await leaderInbox(ctx);
    expect(inbox.map((m) => m.type)).toEqual(["agent_inactive"]);
    expect(inbox[0]?.deliveredAt).toBeDefined();
    expect(leaderSession.prompts.at(-1)?.text).toContain(reason);
  });
});

/**
 * A closed pane is known at once: the background liveness with the default timings (15 s sweeps, 1 s pane watch)
 * against real tmux on a private socket. Kill an agent's pane; within 2 s the agent is inactive, its task is pending
 * again and the leader's notice is delivered. The OpenCode servers are fakes (no model involved); runs in seconds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { v4 as uuidv4 } from "uuid";
import { systemClock } from "../../src/clock.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { type LivenessHandle, startLiveness } from "../../src/operations/liveness/background.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { agentOnDisk, leaderInbox, leadTeam } from "../helpers/team.ts";
import { hasTmux, killServer, tmux, tmuxSocketName } from "./harness/tmux.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

describe.skipIf(!hasTmux())("pane watch on real tmux", () => {
  let socket: string;
  let ctx: TestContext;
  let liveness: LivenessHandle | undefined;

  beforeAll(async () => {
    socket = tmuxSocketName("oct-panewatch");
    // Default timings: the 15 s sweep alone would take up to 15 s.
    ctx = await makeTestContext({ background: true });
    ctx.clock.set(Date.now());
    ctx.edges.tmux = new TmuxCli();
  });

  afterAll(async () => {
    await liveness?.release();
    killServer(socket);
    removeSocketFile(socket);
    await ctx.cleanup();
  });

  test("a killed pane makes its agent inactive, its task pending and the leader notified within 2 s", async () => {
    expect(ctx.options.sweepIntervalMs).toBe(15_000);
    const { call } = await leadTeam(ctx);
    const agentId = uuidv4();
    const created = tmux(socket, ["new-session", "-d", "-s", "team", "-P", "-F", "#{pane_id}", "sleep 3600"]);
    const paneId = created.stdout.trim();
    expect(created.code).toBe(0);
    // As spawn marks it: the pane carries the agent's id, so the pane id alone proves nothing.
    tmux(socket, ["set-option", "-p", "-t", paneId, "@agent_id", agentId]);
    const session = ctx.server.addSession({ activity: "busy" });
    const agent = await addAgent(ctx, "alpha", {
      agentId,
      sessionId: session.id,
      headless: false,
      paneId,
      tmux: { socket, session: "team", window: "0" },
    });
    await call("create-task", { teamName: "alpha", title: "build it", assignee: agentId }, "ses_lead");
    await call(
      "update-task",
      { teamName: "alpha", taskId: "task-1", status: "in_progress" },
      agent.sessionId,
    );

    // The loops wait by the context's clock: this test is about real timings, so they get the real one.
    liveness = startLiveness({ ...ctx, clock: systemClock });
    // The first watch tick sweeps the agent it has not read yet; from then on its pane is watched.
    await Bun.sleep(2_000);

    const killedAt = Date.now();
    expect(tmux(socket, ["kill-pane", "-t", paneId]).code).toBe(0);
    let notifiedAt: number | undefined;
    while (Date.now() - killedAt < 5_000 && notifiedAt === undefined) {
      const inbox = await leaderInbox(ctx);
      if (inbox.some((message) => message.type === "agent_inactive" && message.deliveredAt))
        notifiedAt = Date.now();
      else await Bun.sleep(50);
    }
    const latencyMs = (notifiedAt ?? Number.POSITIVE_INFINITY) - killedAt;
    console.log(`pane killed -> agent inactive and leader notified: ${latencyMs} ms`);
    expect(latencyMs).toBeLessThan(2_000);
    const state = await agentOnDisk(ctx, agent);
    expect(state.status).toBe("inactive");
    expect(state.statusReason).toContain(`its tmux pane ${paneId} is gone`);
    const board = await ctx.store.readTasks("alpha");
    expect(board.kind === "ok" && board.value.tasks[0]?.status).toBe("pending");
    const leader = ctx.local.sessions.get("ses_lead");
    expect(leader?.prompts.some((prompt) => prompt.noReply && prompt.text.includes("became inactive"))).toBe(
      true,
    );
  });
});

/**
 * The leader runs inside the user's own tmux: the team's panes go into a window of their own in the user's session,
 * and the user's current window is never split. Real tmux (a private server standing in for the user's, reached only
 * through $TMUX as a real one would be); the OpenCode side is faked, it plays no part in placement.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { TmuxCli } from "../../src/edges/tmux.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";
import { hasTmux, killServer, listPanes, tmux, tmuxSocketName } from "./harness/tmux.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const socket = tmuxSocketName("oct-inside");
let ctx: TestContext;

beforeAll(async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0 });
});
afterAll(async () => {
  killServer(socket);
  removeSocketFile(socket);
  await ctx.cleanup();
});

test.skipIf(!hasTmux())(
  "inside the user's tmux: a team window in the user's session, the user's window untouched",
  async () => {
    tmux(socket, ["new-session", "-d", "-s", "user", "-n", "editor", "sleep 300"]);
    const [socketPath, serverPid, userPane] = tmux(socket, [
      "display-message",
      "-p",
      "-t",
      "user:editor",
      "#{socket_path}\t#{pid}\t#{pane_id}",
    ])
      .stdout.trim()
      .split("\t");
    // What a process started in that pane sees, and nothing else: no private socket option.
    ctx.edges.tmux = new TmuxCli("tmux", {
      ...process.env,
      TMUX: `${socketPath},${serverPid},0`,
      TMUX_PANE: userPane,
    });
    const attach = path.join(ctx.projectRoot, "fake-opencode");
    writeFileSync(attach, "#!/bin/sh\nexec sleep 300\n");
    chmodSync(attach, 0o755);
    ctx.edges.opencodeBinary = () => attach;

    const call = toolCaller(ctx);
    await call("create-team", { teamName: "alpha" }, "ses_leader");
    const spawned = await call<{ success: boolean; paneId: string; error?: string }>(
      "spawn-agent",
      { teamName: "alpha", prompt: "work" },
      "ses_leader",
    );
    expect(spawned.success).toBe(true);

    const panes = listPanes(socket);
    expect(panes.find((p) => p.paneId === spawned.paneId)).toMatchObject({
      sessionName: "user",
      windowName: "team-alpha",
    });
    expect(panes.filter((p) => p.windowName === "editor").map((p) => p.paneId)).toEqual([userPane ?? "?"]);
    expect(new Set(panes.map((p) => p.sessionName))).toEqual(new Set(["user"]));
    const agent = (await ctx.store.listAgentViews("alpha")).items.find(
      (v) => v.state.paneId === spawned.paneId,
    );
    // The user's own server, identified so a restarted one (pane ids start over) is never taken for it.
    const server = tmux(socket, ["display-message", "-p", "#{pid}:#{start_time}"]).stdout.trim();
    expect(agent?.state.tmux).toEqual({ session: "user", window: "team-alpha", server });
  },
);

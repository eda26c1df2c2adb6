/**
 * An answer goes only to the request the leader was shown (specs/answer-permission.md), against a real `opencode serve`
 * whose config says `"read": "ask"` and `"bash": "ask"`, with the scripted mock model. The agent asks to read a file;
 * the leader is told of that request by id; a human answers it in the pane; the agent asks to run a command next. The
 * leader's "always", meant for the harmless read, must be refused naming the command now pending, and that command
 * must still be pending on the server, answered only by its own id.
 */
import { afterAll, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { type LivenessHandle, startLiveness } from "../../src/operations/liveness/background.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { builtContext } from "../helpers/context.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { useOpencode, waitFor } from "./harness/index.ts";
import { callTool } from "./harness/session-tools.ts";

const TIMING = {
  staleThresholdMs: 5_000,
  sweepIntervalMs: 500,
  graceMisses: 2,
  eventCoalesceMs: 300,
  // The test records this server as the project's (it has no password): a prewarm would take it for one an older
  // version left unprotected and replace it.
  prewarmServer: false,
};

const fx = useOpencode({
  pluginOptions: TIMING,
  config: { permission: { read: "ask", bash: "ask" } },
  waitForTools: ["answer-permission"],
});

let liveness: LivenessHandle | undefined;
afterAll(async () => {
  await liveness?.release();
});

/** The server's own pending permission list for the project (what the TUI and GET /permission show). */
async function pendingIds(url: string, directory: string): Promise<string[]> {
  const response = await fetch(`${url}/permission?directory=${encodeURIComponent(directory)}`);
  const items = (await response.json()) as { id: string }[];
  return items.map((item) => item.id);
}

test("real server: an always meant for a read the human answered in the pane never lands on the bash call asked next", async () => {
  const server = fx.server;
  const ctx = builtContext(server.projectDir, TIMING, "the leader is played by the project server here");
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  const leaderSession = await server.createSession("leader");
  expect((await createTeam(ctx, { teamName: "shown" }, leaderSession)).success).toBe(true);
  const workerSession = await server.createSession("worker");
  const worker = await addAgent(ctx, "shown", { name: "worker", sessionId: workerSession, prompt: "work" });
  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  const { monitor } = liveness;
  await waitFor(() => monitor.stats.connects >= 1, { timeoutMs: 10_000, message: "the monitor's stream" });
  const waitingNow = async () => {
    const state = await ctx.store.readAgent("shown", worker.agentId);
    if (state.kind !== "ok") throw new Error(`worker unreadable: ${state.kind}`);
    return (state.value as AgentState).waitingFor ?? undefined;
  };

  const notes = path.join(server.projectDir, "notes.txt");
  await writeFile(notes, "harmless\n");
  await server.promptAsync(
    workerSession,
    [
      `@@call read ${JSON.stringify({ filePath: notes })}`,
      `@@call bash ${JSON.stringify({ command: "echo dangerous", description: "Run the dangerous one" })}`,
    ].join("\n"),
  );
  const read = await waitFor(
    async () => ((await waitingNow())?.title === "read" ? waitingNow() : undefined),
    {
      timeoutMs: 30_000,
      message: "waitingFor of the read",
    },
  );
  if (!read) throw new Error("no read request");
  // The leader's notice names the request it shows, so the answer can name it back.
  await waitFor(
    async () =>
      (await server.messages(leaderSession)).some((message) =>
        message.parts.some((part) => part.type === "text" && part.text.includes(read.requestId)),
      ),
    { timeoutMs: 10_000, message: "the leader's notice naming the read's requestId" },
  );

  // A human answers the read in the agent's pane; the agent's next turn asks to run a command.
  const reply = await fetch(
    `${server.url}/permission/${encodeURIComponent(read.requestId)}/reply?directory=${encodeURIComponent(server.projectDir)}`,
    {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ reply: "once" }),
    },
  );
  expect(reply.ok).toBe(true);
  const bash = await waitFor(
    async () => ((await waitingNow())?.title === "bash" ? waitingNow() : undefined),
    {
      timeoutMs: 30_000,
      message: "waitingFor of the bash call",
    },
  );
  if (!bash) throw new Error("no bash request");
  expect(bash.requestId).not.toBe(read.requestId);

  const stale = (await callTool(server, leaderSession, "answer-permission", {
    teamName: "shown",
    agentId: worker.agentId,
    requestId: read.requestId,
    response: "always",
  })) as { success: boolean; error?: string };
  console.log(`the leader's answer to the read it was shown: ${JSON.stringify(stale)}`);
  expect(stale.success).toBe(false);
  expect(stale.error).toContain(read.requestId);
  expect(stale.error).toContain(bash.requestId);
  expect(stale.error).toContain("echo dangerous");
  // Nothing reached the command: still pending on the server, under its own id.
  expect(await pendingIds(server.url, server.projectDir)).toContain(bash.requestId);

  const right = (await callTool(server, leaderSession, "answer-permission", {
    teamName: "shown",
    agentId: worker.agentId,
    requestId: bash.requestId,
    response: "reject",
  })) as { success: boolean; requestId?: string };
  expect(right).toMatchObject({ success: true, requestId: bash.requestId });
  await server.waitForIdle(workerSession, { timeoutMs: 30_000 });
  const [ran] = (await server.toolResults(workerSession, "bash")).slice(-1);
  expect(ran?.status).toBe("error");
  await waitFor(async () => (await waitingNow()) === undefined, {
    timeoutMs: 5_000,
    message: "waitingFor cleared",
  });
}, 180_000);

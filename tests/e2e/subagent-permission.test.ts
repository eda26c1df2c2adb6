/**
 * A subagent's request is its agent's (specs/heartbeat.md "Subagents' sessions"), against a real `opencode serve`
 * whose config says `"bash": "ask"`, with the scripted mock model. The worker's turn calls OpenCode's `task` tool; the
 * subagent runs in a child session (`parentID` the worker's session) and asks to run a command there. The worker's
 * waitingFor must name that request (with the child's session), the leader must be told of it once, and
 * answer-permission must answer it by its requestId, on the child's session, so the subagent and the worker finish.
 */
import { afterAll, expect, test } from "bun:test";
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
  // The test records this server as the project's (it has no password): a prewarm would replace it.
  prewarmServer: false,
};

const fx = useOpencode({
  pluginOptions: TIMING,
  config: { permission: { bash: "ask" } },
  waitForTools: ["answer-permission"],
});

let liveness: LivenessHandle | undefined;
afterAll(async () => {
  await liveness?.release();
});

test("real server: a task tool's subagent asks in its child session; the leader is told and answer-permission answers it", async () => {
  const server = fx.server;
  const ctx = builtContext(server.projectDir, TIMING, "the leader is played by the project server here");
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  const leaderSession = await server.createSession("leader");
  expect((await createTeam(ctx, { teamName: "subs" }, leaderSession)).success).toBe(true);
  const workerSession = await server.createSession("worker");
  const worker = await addAgent(ctx, "subs", { name: "worker", sessionId: workerSession, prompt: "work" });
  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  const { monitor } = liveness;
  await waitFor(() => monitor.stats.connects >= 1, { timeoutMs: 10_000, message: "the monitor's stream" });
  const waitingNow = async () => {
    const state = await ctx.store.readAgent("subs", worker.agentId);
    if (state.kind !== "ok") throw new Error(`worker unreadable: ${state.kind}`);
    return (state.value as AgentState).waitingFor ?? undefined;
  };

  const childScript = `@@call bash ${JSON.stringify({ command: "echo from-the-subagent", description: "Echo" })}`;
  await server.promptAsync(
    workerSession,
    `@@call task ${JSON.stringify({ description: "Echo something", prompt: childScript, subagent_type: "general" })}`,
  );
  const asked = await waitFor(
    async () => ((await waitingNow())?.title === "bash" ? waitingNow() : undefined),
    { timeoutMs: 30_000, message: "the worker's waitingFor naming its subagent's bash request" },
  );
  if (!asked?.sessionId) throw new Error(`no child session in ${JSON.stringify(asked)}`);
  expect(asked.sessionId).not.toBe(workerSession);
  expect(asked.pattern).toContain("echo from-the-subagent");
  // The server says the child session is the worker's.
  const child = (await (await fetch(`${server.url}/session/${asked.sessionId}`)).json()) as {
    parentID?: string;
  };
  expect(child.parentID).toBe(workerSession);

  const noticesOf = async (id: string) =>
    (await server.messages(leaderSession)).filter((message) =>
      message.parts.some(
        (part) =>
          part.type === "text" &&
          part.text.includes("is waiting, on behalf of a subagent it started, for permission: bash") &&
          part.text.includes(id),
      ),
    ).length;
  await waitFor(async () => (await noticesOf(asked.requestId)) > 0, {
    timeoutMs: 10_000,
    message: "the leader's notice naming the subagent's request",
  });

  const answered = (await callTool(server, leaderSession, "answer-permission", {
    teamName: "subs",
    agentId: worker.agentId,
    requestId: asked.requestId,
    response: "once",
  })) as { success: boolean; error?: string; requestId?: string };
  console.log(`the leader's answer to the subagent's request: ${JSON.stringify(answered)}`);
  expect(answered).toMatchObject({ success: true, requestId: asked.requestId });

  await server.waitForIdle(workerSession, { timeoutMs: 30_000 });
  const [ran] = (await server.toolResults(asked.sessionId, "bash")).slice(-1);
  expect(ran?.status).toBe("completed");
  expect(ran?.output).toContain("from-the-subagent");
  await waitFor(async () => (await waitingNow()) === undefined, {
    timeoutMs: 5_000,
    message: "waitingFor cleared",
  });
  expect(await noticesOf(asked.requestId)).toBe(1);
}, 180_000);

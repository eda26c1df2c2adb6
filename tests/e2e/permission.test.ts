/**
 * An agent waiting for a permission, against a real `opencode serve` whose project config says `"bash": "ask"`, with
 * the scripted mock model. The plugin runs inside the server with short timings (its monitor hears the events
 * in-process); this test process plays the leader's own OpenCode, running the same liveness over the event stream, so
 * two monitors see every request and the leader must still be told once.
 *
 * Done when (specs/answer-permission.md, specs/heartbeat.md "Waiting agents"): `waitingFor` within 2 s of the request,
 * one notice in the leader's session, untouched by the sweep past its stale threshold and busy cap, and the leader's
 * answer-permission (once / reject) lets the turn finish and clears `waitingFor`.
 */
import { afterAll, expect, test } from "bun:test";
import { SdkOpencodeApi } from "../../src/edges/opencode-client.ts";
import { type LivenessHandle, startLiveness } from "../../src/operations/liveness/background.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { builtContext } from "../helpers/context.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { type OpencodeServer, useOpencode, waitFor } from "./harness/index.ts";
import { callTool } from "./harness/session-tools.ts";

const TIMING = {
  staleThresholdMs: 2_000,
  sweepIntervalMs: 500,
  graceMisses: 2,
  eventCoalesceMs: 300,
  busyCapMs: 3_000,
  // The test records this server as the project's (it has no password): a prewarm would take it for one an older
  // version left unprotected and replace it.
  prewarmServer: false,
};

const fx = useOpencode({
  pluginOptions: TIMING,
  config: { permission: { bash: "ask" } },
  waitForTools: ["answer-permission"],
});

let liveness: LivenessHandle | undefined;
const controller = new AbortController();
afterAll(async () => {
  controller.abort();
  await liveness?.release();
});

/** Every permission/question event of the stream, with the time it arrived here. */
const seen: { at: number; type: string; properties: Record<string, unknown> }[] = [];

async function watchEvents(server: OpencodeServer): Promise<void> {
  const api = new SdkOpencodeApi(server.url, { directory: server.projectDir });
  for await (const event of api.events(controller.signal)) {
    if (/^(permission|question)\./.test(event.type))
      seen.push({
        at: Date.now(),
        type: event.type,
        properties: event.properties as Record<string, unknown>,
      });
  }
}

const LEADER_ON_PROJECT_SERVER = "the leader's OpenCode is played by the project server here";

async function leaderNotices(server: OpencodeServer, leaderSession: string): Promise<string[]> {
  const messages = await server.messages(leaderSession);
  return messages
    .filter((message) => message.info.role === "user")
    .flatMap((message) => message.parts.map((part) => (part.type === "text" ? part.text : "")))
    .filter((text) => text.includes("is waiting for permission"));
}

test("real server: a bash call that asks shows waitingFor, tells the leader once, is spared by the sweep, and answer-permission once / reject ends the wait", async () => {
  const server = fx.server;
  const ctx = builtContext(server.projectDir, TIMING, LEADER_ON_PROJECT_SERVER);
  await ctx.store.init();
  await recordServerInfo(ctx, server.port, { pid: server.pid, logPath: server.logPath });
  const leaderSession = await server.createSession("leader");
  expect((await createTeam(ctx, { teamName: "ask" }, leaderSession)).success).toBe(true);
  const workerSession = await server.createSession("worker-1");
  const worker = await addAgent(ctx, "ask", { name: "worker-1", sessionId: workerSession, prompt: "work" });
  void watchEvents(server).catch(() => undefined);
  liveness = startLiveness(ctx, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
  const { monitor } = liveness;
  await waitFor(() => monitor.stats.connects >= 1, { timeoutMs: 10_000, message: "the monitor's stream" });

  const read = async (): Promise<AgentState> => {
    const state = await ctx.store.readAgent("ask", worker.agentId);
    if (state.kind !== "ok") throw new Error(`worker unreadable: ${state.kind}`);
    return state.value;
  };

  for (const [round, response] of [
    [1, "once"],
    [2, "reject"],
  ] as const) {
    const marker = `asked-${round}`;
    const before = seen.length;
    await server.promptAsync(
      workerSession,
      `@@call bash ${JSON.stringify({ command: `echo ${marker}`, description: `Echo ${marker}` })}`,
    );
    const asked = await waitFor(
      () => seen.slice(before).find((event) => event.type !== "permission.replied"),
      { timeoutMs: 30_000, message: `round ${round}: a permission event from the server` },
    );
    console.log(`round ${round}: the server sent ${asked.type} ${JSON.stringify(asked.properties)}`);
    const waiting = await waitFor(async () => (await read()).waitingFor ?? undefined, {
      timeoutMs: 10_000,
      intervalMs: 20,
      message: `round ${round}: waitingFor`,
    });
    const shownMs = Date.now() - asked.at;
    console.log(`round ${round}: permission asked -> waitingFor ${shownMs} ms`);
    expect(shownMs).toBeLessThan(2_000);
    expect(waiting).toMatchObject({ kind: "permission", title: "bash", pattern: `echo ${marker}` });

    // Past the stale threshold and the busy cap, with sweeps every 500 ms in two processes: nothing happens to it.
    const noticeAt = await waitFor(
      async () => ((await leaderNotices(server, leaderSession)).length >= round ? Date.now() : 0),
      {
        timeoutMs: 5_000,
        intervalMs: 20,
        message: `round ${round}: the leader's notice`,
      },
    );
    console.log(`round ${round}: permission asked -> leader notice ${noticeAt - asked.at} ms`);
    await Bun.sleep(4_000);
    const spared = await read();
    expect(spared.status).toBe("active");
    expect(spared.consecutiveMisses).toBe(0);
    expect(spared.waitingFor?.requestId).toBe(waiting.requestId);
    const notices = await leaderNotices(server, leaderSession);
    expect(notices).toHaveLength(round);
    // The delivery puts a header line above the notice's text (who sent it, its id).
    expect(notices[round - 1]).toEndWith(
      `Agent worker-1 (${worker.agentId}) is waiting for permission: bash (echo ${marker}) ["always" allows: echo *]. Answer with answer-permission (requestId "${waiting.requestId}").`,
    );

    const answered = (await callTool(server, leaderSession, "answer-permission", {
      teamName: "ask",
      agentId: worker.agentId,
      requestId: waiting.requestId,
      response,
      // A reject's reason reaches the agent as the user's feedback on its failed tool call.
      ...(response === "reject" ? { message: "no echo, please" } : {}),
    })) as { success: boolean; requestId: string };
    expect(answered).toMatchObject({ success: true, requestId: waiting.requestId });
    await server.waitForIdle(workerSession, { timeoutMs: 30_000 });
    const [bash] = (await server.toolResults(workerSession, "bash")).slice(-1);
    if (response === "once") {
      expect(bash?.status).toBe("completed");
      expect(bash?.output).toContain(marker);
    } else {
      expect(bash?.status).toBe("error");
      expect(bash?.error).toContain("no echo, please");
    }
    await waitFor(async () => (await read()).waitingFor === null, {
      timeoutMs: 5_000,
      message: `round ${round}: waitingFor cleared`,
    });
    expect((await read()).status).not.toBe("inactive");
  }
  expect(seen.some((event) => event.type === "permission.replied")).toBe(true);
}, 240_000);

test("real server: a question the agent asks is a waitingFor of kind question, answered with answer-permission's message", async () => {
  const server = fx.server;
  if (!liveness) throw new Error("runs after the permission test, on its team");
  const ctx = builtContext(server.projectDir, TIMING, LEADER_ON_PROJECT_SERVER);
  const team = await ctx.store.readTeam("ask");
  if (team.kind !== "ok") throw new Error("team ask unreadable");
  const leaderSession = team.value.leaderSessionId;
  const session = await server.createSession("worker-2");
  const worker = await addAgent(ctx, "ask", { name: "worker-2", sessionId: session, prompt: "work" });
  const question = {
    questions: [
      {
        question: "Which branch should I use?",
        header: "Branch",
        options: [
          { label: "main", description: "the default branch" },
          { label: "dev", description: "the development branch" },
        ],
      },
    ],
  };
  await server.promptAsync(session, `@@call question ${JSON.stringify(question)}`);
  const waiting = await waitFor(
    async () => {
      const state = await ctx.store.readAgent("ask", worker.agentId);
      return state.kind === "ok" ? (state.value.waitingFor ?? undefined) : undefined;
    },
    { timeoutMs: 30_000, message: "waitingFor of the question" },
  );
  console.log(`question: ${JSON.stringify(seen.filter((event) => event.type.startsWith("question.")))}`);
  expect(waiting).toMatchObject({ kind: "question", title: "Which branch should I use?" });
  // The notice lands in the leader's session as a user message: the leader's next prompt must come after it.
  await waitFor(
    async () =>
      (await server.messages(leaderSession)).some((message) =>
        message.parts.some(
          (part) => part.type === "text" && part.text.includes("Which branch should I use?"),
        ),
      ),
    { timeoutMs: 5_000, intervalMs: 20, message: "the leader's notice of the question" },
  );
  const answered = (await callTool(server, leaderSession, "answer-permission", {
    teamName: "ask",
    agentId: worker.agentId,
    requestId: waiting.requestId,
    response: "once",
    message: "dev",
  })) as { success: boolean; kind: string };
  expect(answered).toMatchObject({ success: true, kind: "question" });
  await server.waitForIdle(session, { timeoutMs: 30_000 });
  const [asked] = (await server.toolResults(session, "question")).slice(-1);
  expect(asked?.status).toBe("completed");
  expect(asked?.output).toContain("dev");
  await waitFor(
    async () => {
      const state = await ctx.store.readAgent("ask", worker.agentId);
      return state.kind === "ok" && state.value.waitingFor === null;
    },
    { timeoutMs: 5_000, message: "waitingFor cleared after the answer" },
  );
}, 120_000);

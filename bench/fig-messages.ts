import { UnavailableOpencodeApi } from "../src/edges/unavailable.ts";
import type { TeamsContext } from "../src/operations/context.ts";
import { HUMAN, sendAs } from "../src/operations/messages/messages.ts";
import { notifyLeader } from "../src/operations/messages/notify.ts";
import { createTeam } from "../src/operations/team/team.ts";
import { parseOptions } from "../src/options.ts";
import { buildContext } from "../src/plugin.ts";
import { ServerInfoSchema, type TeamConfig } from "../src/state/schemas.ts";
import { writeJson } from "../src/state/store.ts";
import {
  type MockModel,
  type OpencodeServer,
  startMockModel,
  startOpencode,
  waitFor,
} from "../tests/e2e/harness/index.ts";
import { addAgent } from "../tests/helpers/agents.ts";
import { note } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

/** A context in this process against the real server (recorded as the project's server), as the leader's OpenCode. */
async function contextOn(server: OpencodeServer): Promise<TeamsContext> {
  const ctx = buildContext({
    projectRoot: server.projectDir,
    options: parseOptions({ background: false }),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the bench has no server of its own"),
  });
  await ctx.store.init();
  await writeJson(ctx.store.paths.serverInfo(ctx.projectRoot), ServerInfoSchema, {
    version: 1,
    projectPath: ctx.projectRoot,
    pid: server.pid,
    port: server.port,
    hostname: "127.0.0.1",
    startedAt: new Date().toISOString(),
    activeSessions: 0,
    logPath: server.logPath,
  });
  return ctx;
}

/** send-message to an idle worker -> the worker's model request that carries it (mock's arrival time). */
async function sendToModel(
  ctx: TeamsContext,
  team: TeamConfig,
  server: OpencodeServer,
  mock: MockModel,
  runs: number,
) {
  const sessionId = await server.createSession("bench-worker");
  await addAgent(ctx, team.name, { name: "bench-worker", sessionId, prompt: "work" });
  const samples: number[] = [];
  // One unmeasured round: the first prompt of a session loads the agent and the provider.
  for (let run = -1; run < runs; run++) {
    const tag = `BENCH-MSG-${run + 1}`;
    const started = Date.now();
    const sent = await sendAs(ctx, team, HUMAN, { to: "bench-worker", message: `${tag} check the tests` });
    if (!sent.success || sent.deliveries[0]?.delivery !== "prompted") throw new Error(JSON.stringify(sent));
    const seen = await waitFor(
      () => mock.requests.find((r) => r.sessionId === sessionId && r.lastUserText.includes(tag)),
      { timeoutMs: 20_000, intervalMs: 5 },
    );
    if (run >= 0) samples.push(seen.receivedAt - started);
    await server.waitForIdle(sessionId, { timeoutMs: 20_000 });
  }
  return samples;
}

/** 100 notices within 1 s -> how many messages reach the leader's session (waiting out the digest window). */
async function noticeBurst(ctx: TeamsContext, team: TeamConfig, server: OpencodeServer): Promise<number> {
  const before = await noticeCount(server, team.leaderSessionId);
  // Started 10 ms apart whatever each takes (as several sweeps and completions would), so the 100 land within 1 s.
  const sends: Promise<unknown>[] = [];
  const started = Date.now();
  for (let i = 0; i < 100; i++) {
    sends.push(
      notifyLeader(ctx, team, { type: "agent_inactive", text: `Agent a-${i} became inactive: bench.` }),
    );
    await Bun.sleep(10);
  }
  await Promise.all(sends);
  note(`messages: 100 notices written in ${Date.now() - started} ms`);
  await Bun.sleep(ctx.options.noticeDigestMs + 1_000);
  return (await noticeCount(server, team.leaderSessionId)) - before;
}

async function noticeCount(server: OpencodeServer, sessionId: string): Promise<number> {
  const messages = await server.messages(sessionId);
  return messages.filter(
    (m) =>
      m.info.role === "user" &&
      m.parts.some((p) => p.type === "text" && p.text.startsWith("[notice from opencode-teams")),
  ).length;
}

/**
 * 8: messages on a real `opencode serve` with the scripted mock model. This process sends (as the CLI or the leader's
 * OpenCode would); the figure is from the send-message call to the recipient's model request, on a warm server.
 */
export async function benchMessages(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 5 : 20;
  const bursts = quick ? 1 : 3;
  let mock: MockModel | undefined;
  let server: OpencodeServer | undefined;
  try {
    mock = await startMockModel();
    server = await startOpencode({ mockBaseUrl: mock.baseUrl, pluginOptions: { background: false } });
    await server.waitForToolIds(["send-message"]);
    const ctx = await contextOn(server);
    const leader = await server.createSession("leader");
    const created = await createTeam(ctx, { teamName: "bench" }, leader);
    if (!created.success) throw new Error(created.error);
    const read = await ctx.store.readTeam("bench");
    if (read.kind !== "ok") throw new Error("team unreadable");
    const latency = await sendToModel(ctx, read.value, server, mock, runs);
    note(`messages: ${runs} sends to an idle worker`);
    const counts: number[] = [];
    for (let burst = 0; burst < bursts; burst++) {
      counts.push(await noticeBurst(ctx, read.value, server));
      await Bun.sleep(ctx.options.noticeDigestMs);
    }
    note(`messages: ${bursts} burst(s) of 100 notices`);
    return [
      // No floor yet (a bare prompt_async to the same session would be one): judged by the absolute target.
      figure(
        "8a",
        "send-message -> model request",
        "ms",
        latency,
        { absolute: { text: "< 500 ms", ok: (m) => m < 500 } },
        "to the recipient's model, warm server",
      ),
      figure(
        "8b",
        "100 notices in 1 s -> messages",
        "msgs",
        counts,
        { absolute: { text: "<= 2", ok: (m) => m <= 2 } },
        "messages in the leader's session",
      ),
    ];
  } finally {
    await server?.stop();
    await mock?.stop();
  }
}

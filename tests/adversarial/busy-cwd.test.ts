/**
 * An agent spawned with its own `cwd` has its session in that directory, and OpenCode answers `GET /session/status`
 * and `GET /event` per directory (proved against the real server in busy-cwd-server.test.ts). Asking only for the
 * project root made a busy agent in a sub-directory look silent: the sweep declared it dead and the monitor never
 * heard its events. The fake server here answers per directory, like the real one.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { Event } from "@opencode-ai/sdk";
import { SdkOpencodeApi } from "../../src/edges/opencode-client.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const S = 1_000;
let ctx: TestContext;
let sub: string;

beforeEach(async () => {
  ctx = await makeTestContext();
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
  sub = path.join(ctx.projectRoot, "packages", "web");
  await mkdir(sub, { recursive: true });
});
afterEach(() => ctx.cleanup());

async function state(agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

/** A worker whose session was created in `sub` and is busy there (a long model call: no events, no heartbeats). */
async function busyWorkerInSub(overrides: Partial<AgentState> = {}): Promise<AgentState> {
  const agent = await addAgent(ctx, "alpha", { cwd: sub, ...overrides });
  ctx.server.addSession({ id: agent.sessionId, directory: sub, activity: "busy" });
  return agent;
}

test("the sweep asks for the agent's own directory: a busy worker in a sub-directory stays alive", async () => {
  const inSub = await busyWorkerInSub({ name: "in-sub" });
  const atRoot = await addAgent(ctx, "alpha", { name: "at-root" });
  ctx.server.addSession({ id: atRoot.sessionId, activity: "busy" });
  const sweeper = new StaleSweeper(ctx);
  for (let sweep = 0; sweep < ctx.options.graceMisses + 1; sweep++) {
    ctx.clock.advance(ctx.options.staleThresholdMs + 15 * S);
    const report = await sweeper.sweep();
    expect(report).toMatchObject({ misses: 0, refreshed: 2, serverReachable: true });
    expect(report.inactive).toEqual([]);
  }
  expect(await state(inSub)).toMatchObject({ status: "active", consecutiveMisses: 0 });
  expect((await ctx.store.readHeartbeat("alpha", inSub.agentId)).record?.source).toBe("sweep_busy_check");
  // One status request per sweep whatever the number of directories, and no session lookups: both are busy.
  expect(ctx.server.calls.filter((c) => c === "sessionStatuses")).toHaveLength(ctx.options.graceMisses + 1);
  expect(ctx.server.calls.filter((c) => c.startsWith("sessionExists"))).toEqual([]);
});

test("the monitor's resync asks for the agent's own directory: a busy worker in a sub-directory becomes active", async () => {
  const agent = await busyWorkerInSub({ status: "idle" });
  const monitor = new EventMonitor(ctx);
  ctx.clock.advance(10 * S);
  await monitor.resync(ctx.server);
  await monitor.settled();
  expect(await state(agent)).toMatchObject({
    status: "active",
    heartbeatSource: "sdk_session_status",
    heartbeatTs: new Date(ctx.clock.now()).toISOString(),
  });
});

/** A stand-in for the project server's HTTP API on 127.0.0.1. */
function standIn(handler: (url: URL) => Response) {
  const urls: URL[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      const url = new URL(request.url);
      urls.push(url);
      return handler(url);
    },
  });
  return { server, urls, url: `http://127.0.0.1:${server.port}` };
}

test("the client asks each directory for its statuses and merges the answers", async () => {
  const perDirectory: Record<string, object> = {
    "/p": { ses_root: { type: "busy" } },
    "/p/sub": { ses_sub: { type: "retry", attempt: 1, message: "x", next: 1 } },
  };
  const { server, urls, url } = standIn((u) =>
    Response.json(perDirectory[u.searchParams.get("directory") ?? ""] ?? {}),
  );
  try {
    const api = new SdkOpencodeApi(url, { directory: "/p" });
    expect(await api.sessionStatuses(["/p", "/p/sub", "/p/sub"])).toEqual({
      statuses: { ses_root: "busy", ses_sub: "retry" },
      failed: {},
    });
    expect(urls.map((u) => `${u.pathname}?${u.searchParams.get("directory")}`).sort()).toEqual([
      "/session/status?/p",
      "/session/status?/p/sub",
    ]);
    // Without directories: the one the client names.
    expect(await api.sessionStatuses()).toEqual({ statuses: { ses_root: "busy" }, failed: {} });
  } finally {
    server.stop(true);
  }
});

test("the event stream is the server's global one: events of every directory, unwrapped", async () => {
  const frame = (directory: string | undefined, payload: object) =>
    `data: ${JSON.stringify({ directory, payload })}\n\n`;
  const { server, urls, url } = standIn((u) => {
    if (u.pathname !== "/global/event") return new Response("not found", { status: 404 });
    const body = new ReadableStream<string>({
      start(controller) {
        controller.enqueue(frame(undefined, { type: "server.connected", properties: {} }));
        controller.enqueue(frame("/p/sub", { type: "session.idle", properties: { sessionID: "ses_sub" } }));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  try {
    const api = new SdkOpencodeApi(url, { directory: "/p" });
    const controller = new AbortController();
    const seen: Event[] = [];
    for await (const event of api.events(controller.signal)) {
      seen.push(event);
      if (seen.length === 2) controller.abort();
    }
    expect(seen).toEqual([
      { type: "server.connected", properties: {} },
      { type: "session.idle", properties: { sessionID: "ses_sub" } },
    ] as unknown as Event[]);
    expect(urls[0]?.pathname).toBe("/global/event");
  } finally {
    server.stop(true);
  }
});

/**
 * `GET /session/status` is asked once per directory that has agents. One directory the server cannot answer for (an
 * agent's `cwd` deleted or renamed by a branch switch, a first request that timed out on a loaded machine) made the
 * whole answer fail: every stale busy agent, in every directory, lost its busy check and was declared inactive, and
 * the monitor's resync applied nothing. Only the agents of the failing directory may lose their facts.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { SdkOpencodeApi } from "../../src/edges/opencode-client.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const S = 1_000;
let ctx: TestContext;
let gone: string;

beforeEach(async () => {
  ctx = await makeTestContext();
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
  gone = path.join(ctx.projectRoot, "renamed-away");
  await mkdir(gone, { recursive: true });
  ctx.server.failingDirectories.set(gone, `GET /session/status?directory=${gone} failed: timed out`);
});
afterEach(() => ctx.cleanup());

async function state(agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

test("the sweep: a busy agent at the project root stays alive while another directory fails", async () => {
  const atRoot = await addAgent(ctx, "alpha", { name: "at-root", cwd: ctx.projectRoot });
  ctx.server.addSession({ id: atRoot.sessionId, directory: ctx.projectRoot, activity: "busy" });
  const inGone = await addAgent(ctx, "alpha", { name: "in-gone", cwd: gone });
  ctx.server.addSession({ id: inGone.sessionId, directory: gone, activity: "busy" });
  const sweeper = new StaleSweeper(ctx);
  for (let sweep = 0; sweep < ctx.options.graceMisses; sweep++) {
    ctx.clock.advance(ctx.options.staleThresholdMs + 15 * S);
    const report = await sweeper.sweep();
    expect(report.refreshed).toBe(1);
    expect(report.serverReachable).toBe(false);
  }
  expect(await state(atRoot)).toMatchObject({ status: "active", consecutiveMisses: 0 });
  // The agent of the failing directory has no facts: misses by age, and the reason names its directory.
  const lost = await state(inGone);
  expect(lost.status).toBe("inactive");
  expect(lost.statusReason).toContain(`did not answer for its directory ${gone}`);
});

test("the monitor's resync applies the statuses it got and leaves the failing directory alone", async () => {
  const atRoot = await addAgent(ctx, "alpha", { name: "at-root", cwd: ctx.projectRoot, status: "idle" });
  ctx.server.addSession({ id: atRoot.sessionId, directory: ctx.projectRoot, activity: "busy" });
  const inGone = await addAgent(ctx, "alpha", { name: "in-gone", cwd: gone, status: "active" });
  ctx.server.addSession({ id: inGone.sessionId, directory: gone, activity: "busy" });
  const monitor = new EventMonitor(ctx);
  ctx.clock.advance(10 * S);
  await monitor.resync(ctx.server);
  await monitor.settled();
  expect(await state(atRoot)).toMatchObject({ status: "active", heartbeatSource: "sdk_session_status" });
  // Unknown is not idle: the active agent whose directory did not answer is not turned idle.
  expect(await state(inGone)).toMatchObject({ status: "active", heartbeatTs: inGone.heartbeatTs });
});

test("the client asks each directory on its own and reports the one that failed", async () => {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      const directory = new URL(request.url).searchParams.get("directory");
      if (directory === "/p/gone") return new Response("no such directory", { status: 500 });
      return Response.json(directory === "/p" ? { ses_root: { type: "busy" } } : {});
    },
  });
  try {
    const api = new SdkOpencodeApi(`http://127.0.0.1:${server.port}`, { directory: "/p" });
    const answer = await api.sessionStatuses(["/p", "/p/gone"]);
    expect(answer.statuses).toEqual({ ses_root: "busy" });
    expect(Object.keys(answer.failed)).toEqual(["/p/gone"]);
    expect(answer.failed["/p/gone"]).toContain("/session/status?directory=/p/gone");
  } finally {
    server.stop(true);
  }
});

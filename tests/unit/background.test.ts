import { afterEach, describe, expect, test } from "bun:test";
import type { PluginInput } from "@opencode-ai/plugin";
import type { Event } from "@opencode-ai/sdk";
import type { ManualClock } from "../../src/clock.ts";
import OpencodeTeamsPlugin from "../../src/index.ts";
import { livenessRunning, startLiveness } from "../../src/operations/liveness/background.ts";
import { resolveStorageRoot } from "../../src/state/paths.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { FakeOpencode } from "../helpers/fakes.ts";
import { toolCaller } from "../helpers/tools.ts";

const FAST = { reconnectInitialMs: 5, reconnectMaxMs: 20, streamIdleMs: 60_000 };
const STEP_MS = 5;
const contexts: TestContext[] = [];

async function context(options: Parameters<typeof makeTestContext>[0] = {}): Promise<TestContext> {
  const ctx = await makeTestContext(options);
  contexts.push(ctx);
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
  return ctx;
}

/**
 * Polls `predicate`; with a `clock`, moves it a step between polls so the loops' background waits (reconnect, watchdog,
 * interval) end by the test's time, not the wall's.
 */
async function until(
  predicate: () => boolean | Promise<boolean>,
  clock?: ManualClock,
  timeoutMs = 2_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    clock?.advance(STEP_MS);
    await Bun.sleep(2);
  }
}

/** Counts from now on how many times the loops ask for the project server. */
function countProjectServerAsks(ctx: TestContext): () => number {
  let asked = 0;
  const projectServer = ctx.edges.projectServer;
  ctx.edges.projectServer = () => {
    asked++;
    return projectServer();
  };
  return () => asked;
}

/** Lets `ms` of the test's time pass in steps, giving the loops a turn after each. */
async function elapse(clock: ManualClock, ms: number): Promise<void> {
  for (let passed = 0; passed < ms; passed += STEP_MS) {
    clock.advance(STEP_MS);
    await Bun.sleep(2);
  }
}

afterEach(async () => {
  for (const ctx of contexts.splice(0)) await ctx.cleanup();
});

describe("background: once per process and storage root", () => {
  test("a second start joins the first; the last release stops it", async () => {
    const ctx = await context();
    const first = startLiveness(ctx, FAST);
    const second = startLiveness(ctx, FAST);
    expect(second.monitor).toBe(first.monitor);
    expect(second.sweeper).toBe(first.sweeper);
    await first.release();
    await first.release();
    expect(livenessRunning(ctx.store.paths.root)).toBe(true);
    await second.release();
    expect(livenessRunning(ctx.store.paths.root)).toBe(false);
  });

  test("different storage roots get their own", async () => {
    const a = await context();
    const b = await context();
    const ha = startLiveness(a, FAST);
    const hb = startLiveness(b, FAST);
    expect(ha.monitor).not.toBe(hb.monitor);
    await ha.release();
    await hb.release();
  });

  test("the sweep runs on its interval", async () => {
    const ctx = await context({ sweepIntervalMs: 10 });
    const agent = await addAgent(ctx, "alpha");
    ctx.server.addSession({ id: agent.sessionId });
    ctx.clock.advance(61_000);
    const handle = startLiveness(ctx, FAST);
    try {
      ctx.clock.advance(10);
      await until(async () => {
        const read = await ctx.store.readAgent("alpha", agent.agentId);
        return read.kind === "ok" && read.value.consecutiveMisses === 1;
      });
      const read = await ctx.store.readAgent("alpha", agent.agentId);
      expect(read.kind === "ok" && read.value).toMatchObject({ status: "active", consecutiveMisses: 1 });
    } finally {
      await handle.release();
    }
  });
});

describe("background: the project server's event stream", () => {
  test("reconnects after the stream ends and re-reads statuses every time", async () => {
    const ctx = await context();
    const agent = await addAgent(ctx, "alpha", { status: "idle" });
    ctx.server.addSession({ id: agent.sessionId, activity: "idle" });
    const handle = startLiveness(ctx, FAST);
    try {
      const opened = () => ctx.server.calls.filter((c) => c === "events").length;
      for (let round = 1; round <= 3; round++) {
        await until(() => opened() === round && ctx.server.openStreams === 1, ctx.clock);
        expect([opened(), ctx.server.openStreams]).toEqual([round, 1]);
        ctx.server.emit({ type: "server.connected", properties: {} } as unknown as Event);
        await until(() => handle.monitor.stats.resyncs === round);
        expect(handle.monitor.stats.resyncs).toBe(round);
        ctx.server.closeStreams();
      }
      expect(handle.monitor.stats.connects).toBe(3);
      // Events flow again on the new connection.
      await until(() => opened() === 4 && ctx.server.openStreams === 1, ctx.clock);
      expect([opened(), ctx.server.openStreams]).toEqual([4, 1]);
      ctx.server.emit({ type: "server.connected", properties: {} } as unknown as Event);
      ctx.server.emit({
        type: "session.status",
        properties: { sessionID: agent.sessionId, status: { type: "busy" } },
      } as Event);
      await until(async () => {
        const read = await ctx.store.readAgent("alpha", agent.agentId);
        return read.kind === "ok" && read.value.status === "active";
      });
      const read = await ctx.store.readAgent("alpha", agent.agentId);
      expect(read.kind === "ok" && read.value).toMatchObject({
        status: "active",
        heartbeatSource: "sdk_session_status",
      });
    } finally {
      await handle.release();
    }
    expect(ctx.server.openStreams).toBe(0);
  });

  test("keeps retrying while the server is down or not running, and connects once it is back", async () => {
    const ctx = await context();
    ctx.projectServerUp = false;
    const asked = countProjectServerAsks(ctx);
    const handle = startLiveness(ctx, FAST);
    try {
      await until(() => asked() >= 3, ctx.clock);
      expect(asked()).toBeGreaterThanOrEqual(3);
      expect(ctx.server.calls).not.toContain("events");
      ctx.projectServerUp = true;
      ctx.server.down = true;
      await until(() => ctx.server.calls.filter((c) => c === "events").length >= 2, ctx.clock);
      expect(ctx.server.calls.filter((c) => c === "events").length).toBeGreaterThanOrEqual(2);
      expect(ctx.server.openStreams).toBe(0);
      ctx.server.down = false;
      await until(() => ctx.server.openStreams === 1, ctx.clock);
      ctx.server.emit({ type: "server.connected", properties: {} } as unknown as Event);
      await until(() => handle.monitor.stats.connects === 1);
      expect(handle.monitor.stats.connects).toBe(1);
      expect(ctx.server.calls.filter((c) => c === "events").length).toBeGreaterThanOrEqual(3);
      expect(ctx.server.openStreams).toBe(1);
    } finally {
      await handle.release();
    }
  });

  test("a wedged stream (no event, not even server.heartbeat) is reopened", async () => {
    const ctx = await context();
    const handle = startLiveness(ctx, { ...FAST, streamIdleMs: 30 });
    try {
      await until(() => ctx.server.calls.filter((c) => c === "events").length >= 3, ctx.clock);
      expect(ctx.server.calls.filter((c) => c === "events").length).toBeGreaterThanOrEqual(3);
      // Each wedged stream was closed before the next opened: never two at once.
      expect(ctx.server.openStreams).toBeLessThanOrEqual(1);
      expect(handle.monitor.stats.connects).toBe(0);
    } finally {
      await handle.release();
    }
  });

  test("in the project server's own process the stream is not used: the event hook has the events", async () => {
    const ctx = await context();
    const self = new FakeOpencode(ctx.server.baseUrl);
    ctx.edges.localServer = self;
    const asked = countProjectServerAsks(ctx);
    const handle = startLiveness(ctx, FAST);
    try {
      await elapse(ctx.clock, 40);
      expect(asked()).toBeGreaterThanOrEqual(2);
      expect(ctx.server.calls).not.toContain("events");
    } finally {
      await handle.release();
    }
  });
});

describe("plugin entry", () => {
  function input(directory: string): PluginInput {
    return {
      client: {},
      project: { id: "p", worktree: directory, time: { created: 0 } },
      directory,
      worktree: directory,
      serverUrl: new URL("http://127.0.0.1:4096"),
      $: {},
    } as unknown as PluginInput;
  }

  test("two plugin instances in one process share one monitor and sweep; dispose stops them", async () => {
    const ctx = await context();
    const root = resolveStorageRoot(ctx.projectRoot);
    const first = await OpencodeTeamsPlugin(input(ctx.projectRoot), {});
    const second = await OpencodeTeamsPlugin(input(ctx.projectRoot), { sweepIntervalMs: 20_000 });
    expect(livenessRunning(root)).toBe(true);
    expect(Object.keys(first.tool ?? {})).toEqual(expect.arrayContaining(["heartbeat", "get-agent-status"]));
    await first.event?.({ event: { type: "session.idle", properties: { sessionID: "ses_x" } } });
    await first.dispose?.();
    expect(livenessRunning(root)).toBe(true);
    await second.dispose?.();
    expect(livenessRunning(root)).toBe(false);
  });

  test("background: false starts nothing", async () => {
    const ctx = await context();
    const plugin = await OpencodeTeamsPlugin(input(ctx.projectRoot), { background: false });
    expect(livenessRunning(resolveStorageRoot(ctx.projectRoot))).toBe(false);
    await plugin.event?.({ event: { type: "session.idle", properties: { sessionID: "ses_x" } } });
    await plugin.dispose?.();
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { classifyEvent, isContextOverflow } from "../../src/operations/liveness/signals.ts";
import { agentSessionTitle } from "../../src/operations/team/identity-prompt.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, type LedTeam, leaderInbox, ledTeamContext, taskInProgress } from "../helpers/team.ts";

let ctx: TestContext;
let lead: LedTeam;
let monitor: EventMonitor;

const S = 1_000;

/** Events as OpenCode 1.18 sends them (bus and SSE alike). */
const ev = {
  connected: () => ({ type: "server.connected", properties: {} }),
  status: (sessionID: string, type: "busy" | "idle" | "retry") => ({
    type: "session.status",
    properties: {
      sessionID,
      status: type === "retry" ? { type, attempt: 1, message: "x", next: 0 } : { type },
    },
  }),
  idle: (sessionID: string) => ({ type: "session.idle", properties: { sessionID } }),
  sessionUpdated: (id: string) => ({ type: "session.updated", properties: { info: { id, title: "t" } } }),
  messageUpdated: (sessionID: string) => ({
    type: "message.updated",
    properties: { info: { id: "msg_1", sessionID, role: "assistant" } },
  }),
  textPart: (sessionID: string) => ({
    type: "message.part.updated",
    properties: { part: { id: "prt_1", sessionID, messageID: "msg_1", type: "text", text: "hi" } },
  }),
  toolPart: (sessionID: string, status: "pending" | "running" | "completed" | "error") => ({
    type: "message.part.updated",
    properties: {
      part: { id: "prt_2", sessionID, messageID: "msg_1", type: "tool", tool: "bash", state: { status } },
    },
  }),
  error: (sessionID: string, name: string, message?: string) => ({
    type: "session.error",
    properties: { sessionID, error: { name, data: message === undefined ? {} : { message } } },
  }),
  deleted: (id: string) => ({ type: "session.deleted", properties: { info: { id, title: "t" } } }),
};

beforeEach(async () => {
  ({ ctx, ...lead } = await ledTeamContext());
  monitor = new EventMonitor(ctx, { indexRebuildMs: 0 });
});
afterEach(() => ctx.cleanup());

const state = (agent: { agentId: string }) => agentOnDisk(ctx, agent);

async function slotUpdates(agent: AgentState): Promise<number> {
  return (await ctx.store.readHeartbeat("alpha", agent.agentId)).record?.updates ?? 0;
}

async function feed(...events: unknown[]): Promise<void> {
  for (const event of events) monitor.handleEvent(event);
  await monitor.settled();
}

describe("event classification", () => {
  test("OpenCode's event names map to liveness signals", () => {
    expect(classifyEvent(ev.status("s", "busy"))).toEqual({
      kind: "busy",
      sessionId: "s",
      source: "sdk_session_status",
    });
    expect(classifyEvent(ev.status("s", "retry"))?.kind).toBe("busy");
    expect(classifyEvent(ev.status("s", "idle"))?.kind).toBe("idle");
    expect(classifyEvent(ev.idle("s"))).toEqual({ kind: "idle", sessionId: "s", source: "sdk_session_idle" });
    expect(classifyEvent(ev.sessionUpdated("s"))).toMatchObject({
      kind: "activity",
      source: "sdk_session_updated",
    });
    expect(classifyEvent(ev.messageUpdated("s"))).toMatchObject({ kind: "activity", source: "sdk_message" });
    expect(classifyEvent(ev.textPart("s"))).toMatchObject({ kind: "activity", running: false });
    expect(classifyEvent(ev.toolPart("s", "running"))).toMatchObject({
      kind: "activity",
      source: "sdk_tool_execute",
      running: true,
    });
    expect(classifyEvent(ev.toolPart("s", "completed"))).toMatchObject({ running: false });
    expect(classifyEvent(ev.error("s", "APIError", "rate limited"))).toEqual({
      kind: "error",
      sessionId: "s",
      name: "APIError",
      message: "rate limited",
    });
    expect(classifyEvent(ev.deleted("s"))).toEqual({ kind: "deleted", sessionId: "s" });
  });

  test("everything else, and malformed events, are ignored without throwing", () => {
    for (const event of [
      ev.connected(),
      { type: "server.heartbeat", properties: {} },
      { type: "session.error", properties: { error: { name: "UnknownError" } } },
      { type: "session.status", properties: { sessionID: "s" } },
      { type: "message.part.updated", properties: { part: null } },
      null,
      "session.idle",
      42,
      { properties: {} },
    ]) {
      expect(classifyEvent(event)).toBeUndefined();
    }
  });

  test("context overflow is recognised by name or by the provider's wording", () => {
    expect(isContextOverflow("ContextOverflowError", undefined)).toBe(true);
    expect(isContextOverflow("APIError", "This model's maximum context length is 8192 tokens")).toBe(true);
    expect(isContextOverflow("APIError", "prompt is too long: 210000 tokens > 200000 maximum")).toBe(true);
    expect(isContextOverflow("APIError", "rate limited")).toBe(false);
  });
});

describe("monitor: transitions", () => {
  test("busy: heartbeat from the event and the agent is active", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "idle" });
    ctx.clock.advance(7 * S);
    await feed(ev.status(agent.sessionId, "busy"));
    expect(await state(agent)).toMatchObject({
      status: "active",
      heartbeatTs: "2026-01-01T00:00:07.000Z",
      heartbeatSource: "sdk_session_status",
      lastEventAt: "2026-01-01T00:00:07.000Z",
    });
    const slot = (await ctx.store.readHeartbeat("alpha", agent.agentId)).record;
    expect(slot).toMatchObject({
      heartbeatTs: "2026-01-01T00:00:07.000Z",
      lastEventAt: "2026-01-01T00:00:07.000Z",
    });
  });

  test("spawning becomes active on its first activity", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "spawning" });
    await feed(ev.toolPart(agent.sessionId, "running"));
    expect((await state(agent)).status).toBe("active");
  });

  test("session.idle and session.status idle make the agent idle at once", async () => {
    const a = await addAgent(ctx, "alpha", { name: "a" });
    const b = await addAgent(ctx, "alpha", { name: "b" });
    await feed(ev.status(a.sessionId, "busy"), ev.idle(a.sessionId), ev.status(b.sessionId, "idle"));
    expect((await state(a)).status).toBe("idle");
    expect((await state(b)).status).toBe("idle");
  });

  test("an agent spawned right after another is followed from its first event, though the index was just built", async () => {
    monitor = new EventMonitor(ctx, { indexRebuildMs: 2 * S });
    const first = await addAgent(ctx, "alpha", { name: "first" });
    await feed(ev.status(first.sessionId, "busy"));
    const next = await addAgent(ctx, "alpha", { name: "next" });
    const title = agentSessionTitle("alpha", "next", next.agentId);
    // A quick first turn, all of it inside the index's rebuild interval.
    await feed(
      { type: "session.created", properties: { info: { id: next.sessionId, title } } },
      ev.status(next.sessionId, "busy"),
      ev.idle(next.sessionId),
    );
    expect((await state(next)).status).toBe("idle");
  });

  test("a new agent's first events wait out the hold that leaves its first turn the CPU, then apply in order", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "new" });
    const title = agentSessionTitle("alpha", "new", agent.agentId);
    const createdAt = ctx.clock.now();
    await feed(
      { type: "session.created", properties: { info: { id: agent.sessionId, title } } },
      ev.status(agent.sessionId, "busy"),
      ev.idle(agent.sessionId),
    );
    const after = await state(agent);
    expect(after.status).toBe("idle");
    // Written once the queue went on (the test clock moves through a wait that is not in the background).
    expect(Date.parse(after.heartbeatTs)).toBeGreaterThanOrEqual(createdAt + 200);
  });

  test("agents created together share one hold: five spawns at once hold the queue 200 ms, not a second", async () => {
    const agents = [];
    for (let i = 0; i < 5; i++) agents.push(await addAgent(ctx, "alpha", { name: `new-${i}` }));
    const createdAt = ctx.clock.now();
    await feed(
      ...agents.map((agent) => ({
        type: "session.created",
        properties: {
          info: { id: agent.sessionId, title: agentSessionTitle("alpha", agent.name, agent.agentId) },
        },
      })),
      ...agents.map((agent) => ev.idle(agent.sessionId)),
    );
    for (const agent of agents) expect((await state(agent)).status).toBe("idle");
    expect(ctx.clock.now() - createdAt).toBe(200);
  });

  test("a quick busy -> idle -> busy sequence ends in the last state", async () => {
    const agent = await addAgent(ctx, "alpha");
    await feed(
      ev.status(agent.sessionId, "busy"),
      ev.idle(agent.sessionId),
      ev.status(agent.sessionId, "busy"),
    );
    expect((await state(agent)).status).toBe("active");
  });

  test("updates after the turn ended do not flip an idle agent back to active", async () => {
    const agent = await addAgent(ctx, "alpha");
    await feed(
      ev.status(agent.sessionId, "busy"),
      ev.status(agent.sessionId, "idle"),
      ev.idle(agent.sessionId),
    );
    ctx.clock.advance(6 * S);
    await feed(
      ev.messageUpdated(agent.sessionId),
      ev.sessionUpdated(agent.sessionId),
      ev.textPart(agent.sessionId),
    );
    expect((await state(agent)).status).toBe("idle");
    // They still count as signs of life.
    expect((await ctx.store.readHeartbeat("alpha", agent.agentId)).record?.heartbeatTs).toBe(
      "2026-01-01T00:00:06.000Z",
    );
  });

  test("a running tool makes an idle agent active", async () => {
    const agent = await addAgent(ctx, "alpha");
    await feed(ev.idle(agent.sessionId), ev.toolPart(agent.sessionId, "running"));
    expect((await state(agent)).status).toBe("active");
  });

  test("activity from a session whose server state is unknown makes an idle agent active", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "idle" });
    await feed(ev.messageUpdated(agent.sessionId));
    expect((await state(agent)).status).toBe("active");
  });

  test("an event heartbeat resets counted misses", async () => {
    const agent = await addAgent(ctx, "alpha", {
      consecutiveMisses: 1,
      lastMissAt: "2026-01-01T00:00:00.000Z",
    });
    ctx.clock.advance(S);
    await feed(ev.textPart(agent.sessionId));
    const after = await state(agent);
    expect(after.consecutiveMisses).toBe(0);
    expect(after.lastMissAt).toBeUndefined();
  });

  test("events never revive an inactive or terminated agent", async () => {
    const dead = await addAgent(ctx, "alpha", { status: "inactive", name: "dead" });
    const gone = await addAgent(ctx, "alpha", { status: "terminated", name: "gone" });
    for (let i = 0; i < 3; i++) {
      ctx.clock.advance(6 * S);
      await feed(ev.status(dead.sessionId, "busy"), ev.toolPart(gone.sessionId, "running"));
    }
    expect(await state(dead)).toEqual(dead);
    expect(await state(gone)).toEqual(gone);
    expect(await slotUpdates(dead)).toBe(0);
    expect(monitor.stats.writes).toBe(0);
  });

  test("a shutting_down agent keeps its status; its heartbeat still counts", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "shutting_down" });
    await feed(ev.status(agent.sessionId, "busy"), ev.idle(agent.sessionId));
    expect((await state(agent)).status).toBe("shutting_down");
    expect(await slotUpdates(agent)).toBe(1);
  });

  test("sessions that belong to no agent are ignored", async () => {
    await feed(ev.status("ses_other", "busy"), ev.deleted("ses_other"));
    expect(monitor.stats.agentEvents).toBe(0);
    expect(monitor.stats.writes).toBe(0);
  });
});

describe("monitor: coalescing", () => {
  test("at most one heartbeat write per agent per 5 s, however many events", async () => {
    const agent = await addAgent(ctx, "alpha");
    await feed(ev.status(agent.sessionId, "busy"));
    expect(await slotUpdates(agent)).toBe(1);
    for (let i = 0; i < 200; i++) {
      ctx.clock.advance(20);
      monitor.handleEvent(i % 2 ? ev.textPart(agent.sessionId) : ev.toolPart(agent.sessionId, "running"));
    }
    await monitor.settled();
    // 4 s of events: all coalesced.
    expect(await slotUpdates(agent)).toBe(1);
    expect(monitor.stats.coalesced).toBe(200);
    ctx.clock.advance(1_000);
    await feed(ev.textPart(agent.sessionId), ev.textPart(agent.sessionId));
    expect(await slotUpdates(agent)).toBe(2);
  });

  test("agents are coalesced independently", async () => {
    const a = await addAgent(ctx, "alpha", { name: "a" });
    const b = await addAgent(ctx, "alpha", { name: "b" });
    await feed(
      ev.textPart(a.sessionId),
      ev.textPart(b.sessionId),
      ev.textPart(a.sessionId),
      ev.textPart(b.sessionId),
    );
    expect(await slotUpdates(a)).toBe(1);
    expect(await slotUpdates(b)).toBe(1);
  });

  test("status transitions are written at once, inside the coalescing window", async () => {
    const agent = await addAgent(ctx, "alpha");
    await feed(ev.status(agent.sessionId, "busy"));
    ctx.clock.advance(100);
    await feed(ev.idle(agent.sessionId));
    expect((await state(agent)).status).toBe("idle");
    ctx.clock.advance(100);
    await feed(ev.status(agent.sessionId, "busy"));
    expect((await state(agent)).status).toBe("active");
    expect(await slotUpdates(agent)).toBe(3);
  });

  test("the durable agent file is not rewritten by heartbeats without a transition", async () => {
    const agent = await addAgent(ctx, "alpha");
    const before = await Bun.file(ctx.store.paths.agentState("alpha", agent.agentId)).text();
    for (let i = 0; i < 5; i++) {
      ctx.clock.advance(6 * S);
      await feed(ev.textPart(agent.sessionId));
    }
    expect(await slotUpdates(agent)).toBe(5);
    expect(await Bun.file(ctx.store.paths.agentState("alpha", agent.agentId)).text()).toBe(before);
  });
});

describe("monitor: errors", () => {
  test("session.error records error.name and error.data.message", async () => {
    const agent = await addAgent(ctx, "alpha");
    ctx.clock.advance(3 * S);
    await feed(ev.error(agent.sessionId, "APIError", "rate limited"));
    expect(await state(agent)).toMatchObject({
      lastError: "APIError: rate limited",
      lastErrorAt: "2026-01-01T00:00:03.000Z",
      sessionRotationCount: 0,
    });
    await feed(ev.error(agent.sessionId, "MessageOutputLengthError"));
    expect((await state(agent)).lastError).toBe("MessageOutputLengthError");
  });

  test("a context overflow counts toward session rotation; a duplicate delivery does not count twice", async () => {
    const agent = await addAgent(ctx, "alpha");
    const overflow = ev.error(agent.sessionId, "ContextOverflowError", "Session too large to compact");
    await feed(overflow, overflow);
    expect(await state(agent)).toMatchObject({
      sessionRotationCount: 1,
      lastError: "ContextOverflowError: Session too large to compact",
    });
    ctx.clock.advance(6 * S);
    await feed(overflow);
    expect((await state(agent)).sessionRotationCount).toBe(2);
  });
});

describe("monitor: deleted sessions", () => {
  test("session.deleted: inactive now, tasks back to pending, the leader notified", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "doomed" });
    const taskId = await taskInProgress(lead.call, "ses_lead", "t", { assignee: agent.agentId });
    await feed(ev.deleted(agent.sessionId));
    expect(await state(agent)).toMatchObject({
      status: "inactive",
      statusReason: `its OpenCode session ${agent.sessionId} was deleted`,
    });
    const tasks = await ctx.store.readTasks("alpha");
    expect(tasks.kind === "ok" && tasks.value.tasks[0]).toMatchObject({ status: "pending", assignee: null });
    const text = `Agent doomed (${agent.agentId}) became inactive: its OpenCode session ${agent.sessionId} was deleted. Tasks returned to pending: ${taskId}.`;
    expect((await leaderInbox(ctx)).map((m) => m.text)).toEqual([text]);
    expect(lead.leaderSession.prompts).toEqual([
      {
        text: expect.stringMatching(/^\[notice from opencode-teams via team alpha, id [0-9a-f-]+\]\n/),
        noReply: true,
      },
    ]);
    expect(lead.leaderSession.prompts[0]?.text.endsWith(`\n${text}`)).toBe(true);
    // Delivered twice (hook and stream, or the plugin loaded twice): still one notice.
    await feed(ev.deleted(agent.sessionId));
    expect(await leaderInbox(ctx)).toHaveLength(1);
  });

  test("a death whose flush to disk fails still hands its tasks back (the flush failure is logged)", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "doomed" });
    await taskInProgress(lead.call, "ses_lead", "t", { assignee: agent.agentId });
    ctx.store.flushAgent = async () => {
      throw new Error("EIO: i/o error, fsync");
    };
    await feed(ev.deleted(agent.sessionId));
    expect((await state(agent)).status).toBe("inactive");
    const tasks = await ctx.store.readTasks("alpha");
    expect(tasks.kind === "ok" && tasks.value.tasks[0]).toMatchObject({ status: "pending", assignee: null });
    expect(await leaderInbox(ctx)).toHaveLength(1);
    expect(ctx.logs.some((l) => l.message === "could not flush an agent's death to disk")).toBe(true);
  });

  test("a deletion during a kill (shutting_down) and the leader's own session are not deaths", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "shutting_down" });
    await feed(ev.deleted(agent.sessionId), ev.deleted("ses_lead"));
    expect((await state(agent)).status).toBe("shutting_down");
    expect((await state({ agentId: lead.leaderId })).status).toBe("active");
    expect(await leaderInbox(ctx)).toEqual([]);
  });
});

describe("monitor: the leader's own session", () => {
  test("its events keep the leader's heartbeat fresh", async () => {
    ctx.clock.advance(40 * S);
    await feed(ev.status("ses_lead", "busy"));
    const view = await ctx.store.readAgentView("alpha", lead.leaderId);
    expect(view.kind === "ok" && view.value.heartbeatTs).toBe("2026-01-01T00:00:40.000Z");
  });
});

describe("monitor: the project server's event stream", () => {
  test("after connecting, session statuses are re-read and state made to agree", async () => {
    const working = await addAgent(ctx, "alpha", { name: "working", status: "idle" });
    const finished = await addAgent(ctx, "alpha", { name: "finished", status: "active" });
    const fresh = await addAgent(ctx, "alpha", { name: "fresh", status: "spawning" });
    ctx.server.addSession({ id: working.sessionId, activity: "busy" });
    ctx.server.addSession({ id: finished.sessionId, activity: "idle" });
    ctx.server.addSession({ id: fresh.sessionId, activity: "idle" });
    const controller = new AbortController();
    const consuming = monitor.consume(ctx.server, controller.signal);
    while (ctx.server.openStreams === 0) await Bun.sleep(1);
    ctx.server.emit(ev.connected() as unknown as Event);
    ctx.server.emit(ev.textPart(working.sessionId) as unknown as Event);
    ctx.server.closeStreams();
    expect(await consuming).toBe(true);
    await monitor.settled();
    expect(monitor.stats).toMatchObject({ connects: 1, resyncs: 1 });
    expect(ctx.server.calls).toContain("sessionStatuses");
    expect((await state(working)).status).toBe("active");
    expect((await state(finished)).status).toBe("idle");
    // Idle on the server says nothing about a spawn still under way.
    expect((await state(fresh)).status).toBe("spawning");
    // An idle session missing from the map is no sign of life.
    expect(await slotUpdates(finished)).toBe(0);
  });

  test("a stream that ends without an event reports no connection", async () => {
    const controller = new AbortController();
    const consuming = monitor.consume(ctx.server, controller.signal);
    while (ctx.server.openStreams === 0) await Bun.sleep(1);
    ctx.server.closeStreams();
    expect(await consuming).toBe(false);
    ctx.server.down = true;
    expect(await monitor.consume(ctx.server, controller.signal)).toBe(false);
  });
});

describe("a session handed to a resumed agent", () => {
  test("events for the session reach the new record once the old one has ended", async () => {
    const old = await addAgent(ctx, "alpha", { name: "w" });
    await feed(ev.status(old.sessionId, "busy"));
    await ctx.store.updateAgent("alpha", old.agentId, (s) =>
      s ? { ...s, status: "terminated", outcome: "interrupted" } : undefined,
    );
    // The old record is known terminated to the monitor: its events change nothing there.
    await feed(ev.idle(old.sessionId));
    const next = await addAgent(ctx, "alpha", {
      name: "w",
      sessionId: old.sessionId,
      resumes: old.agentId,
      status: "active",
    });
    ctx.clock.advance(10 * S);
    await feed(ev.idle(old.sessionId));
    expect((await state(next)).status).toBe("idle");
    expect((await state(old)).status).toBe("terminated");
  });
});

describe("a session's next prompt and model call", () => {
  const userMessage = (sessionID: string) => ({
    type: "message.updated",
    properties: { info: { id: "msg_u", sessionID, role: "user" } },
  });

  test("is seen from its event, whether it came before or during the wait; another session's is not", async () => {
    const early = monitor.messages.watch("ses_a", "prompt");
    monitor.handleEvent(userMessage("ses_a"));
    expect(await early.wait(10_000)).toBe(true);

    const during = monitor.messages.watch("ses_b", "prompt");
    const waiting = during.wait(60_000);
    monitor.handleEvent(userMessage("ses_other"));
    monitor.handleEvent(ev.messageUpdated("ses_b"));
    monitor.handleEvent(userMessage("ses_b"));
    expect(await waiting).toBe(true);
  });

  test("a model call under way is seen from its step-start part, not from the user message or another session's", async () => {
    const stepStart = (sessionID: string) => ({
      type: "message.part.updated",
      properties: { part: { id: "prt_s", sessionID, messageID: "msg_a", type: "step-start" } },
    });
    const others = monitor.messages.watch("ses_f", "model-call");
    monitor.handleEvent(userMessage("ses_f"));
    monitor.handleEvent(stepStart("ses_other"));
    monitor.handleEvent(ev.messageUpdated("ses_f"));
    expect(await others.wait(50)).toBe(false);
    const call = monitor.messages.watch("ses_e", "model-call");
    const waiting = call.wait(60_000);
    monitor.handleEvent(userMessage("ses_e"));
    monitor.handleEvent(stepStart("ses_e"));
    expect(await waiting).toBe(true);
  });

  test("a wait with no such event ends false, and nothing is left watching", async () => {
    const watch = monitor.messages.watch("ses_c", "prompt");
    monitor.handleEvent(ev.messageUpdated("ses_c"));
    expect(await watch.wait(100)).toBe(false);
    const cancelled = monitor.messages.watch("ses_d", "prompt");
    cancelled.cancel();
    monitor.handleEvent(userMessage("ses_d"));
    expect(await cancelled.wait(0)).toBe(false);
  });
});

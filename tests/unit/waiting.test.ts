import { afterEach, describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import type { Event } from "@opencode-ai/sdk";
import { v4 as uuidv4 } from "uuid";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { classifyEvent } from "../../src/operations/liveness/signals.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { waitingNotice } from "../../src/operations/liveness/waiting.ts";
import type { TeamsOptions } from "../../src/options.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, leaderInbox, ledTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;

async function setUp(options: Partial<TeamsOptions> = {}) {
  ({ ctx, call } = await ledTeamContext(options));
}
afterEach(() => ctx?.cleanup());

/** `permission.asked` as OpenCode 1.18.33 sends it on the event stream. */
function asked(sessionID: string, id = "per_1"): Event {
  return {
    type: "permission.asked",
    properties: {
      id,
      sessionID,
      permission: "bash",
      patterns: ["git push"],
      metadata: {},
      always: ["git push *"],
      tool: { messageID: "msg_1", callID: "call_1" },
    },
  } as unknown as Event;
}

function replied(sessionID: string, requestID = "per_1"): Event {
  return {
    type: "permission.replied",
    properties: { sessionID, requestID, reply: "once" },
  } as unknown as Event;
}

async function worker(overrides: Partial<AgentState> = {}): Promise<AgentState> {
  const session = ctx.server.addSession({ activity: "busy" });
  return addAgent(ctx, "alpha", { sessionId: session.id, ...overrides });
}

async function feed(monitor: EventMonitor, ...events: Event[]) {
  for (const event of events) monitor.handleEvent(event);
  await monitor.settled();
}

const notices = async () =>
  (await leaderInbox(ctx)).filter((message) => message.text.includes("is waiting for"));

describe("permission events", () => {
  test("both names of the asked event and every reply event are read", () => {
    expect(classifyEvent(asked("ses_a"))).toEqual({
      kind: "waiting",
      sessionId: "ses_a",
      request: {
        kind: "permission",
        requestId: "per_1",
        title: "bash",
        pattern: "git push",
        always: "git push *",
      },
    });
    const sdkShape = {
      type: "permission.updated",
      properties: { id: "per_2", type: "bash", pattern: "ls", sessionID: "ses_a", title: "Run ls" },
    };
    expect(classifyEvent(sdkShape)).toMatchObject({
      kind: "waiting",
      request: { requestId: "per_2", title: "Run ls", pattern: "ls" },
    });
    expect(classifyEvent(replied("ses_a"))).toEqual({
      kind: "answered",
      sessionId: "ses_a",
      requestId: "per_1",
    });
    const sdkReply = {
      type: "permission.replied",
      properties: { sessionID: "s", permissionID: "p", response: "once" },
    };
    expect(classifyEvent(sdkReply)).toEqual({ kind: "answered", sessionId: "s", requestId: "p" });
    const question = {
      type: "question.asked",
      properties: {
        id: "que_1",
        sessionID: "s",
        questions: [{ question: "Which branch?", header: "Branch" }],
      },
    };
    expect(classifyEvent(question)).toEqual({
      kind: "waiting",
      sessionId: "s",
      request: { kind: "question", requestId: "que_1", title: "Which branch?" },
    });
    expect(
      classifyEvent({ type: "question.rejected", properties: { sessionID: "s", requestID: "que_1" } }),
    ).toEqual({ kind: "answered", sessionId: "s", requestId: "que_1" });
  });

  test("an asked request sets waitingFor, tells the leader once, shows in status and listings, and clears on reply", async () => {
    await setUp();
    const agent = await worker();
    const monitor = new EventMonitor(ctx);
    await feed(monitor, asked(agent.sessionId), asked(agent.sessionId));
    const waiting = (await agentOnDisk(ctx, agent)).waitingFor;
    expect(waiting).toMatchObject({
      kind: "permission",
      requestId: "per_1",
      title: "bash",
      pattern: "git push",
    });
    const sent = await notices();
    expect(sent.map((message) => message.text)).toEqual([
      `Agent worker-1 (${agent.agentId}) is waiting for permission: bash (git push) ["always" allows: git push *]. Answer with answer-permission (requestId "per_1").`,
    ]);
    expect(sent[0]?.deliveredAt).toBeDefined();

    const status = await call<{
      agents: { agentId: string; waitingFor: unknown }[];
      summary: { waiting: number };
    }>("get-agent-status", { teamName: "alpha" }, "ses_lead");
    expect(status.summary.waiting).toBe(1);
    expect(status.agents.find((a) => a.agentId === agent.agentId)?.waitingFor).toMatchObject({
      kind: "permission",
      requestId: "per_1",
      pattern: "git push",
    });
    const listed = await call<{
      agents: { agent_id: string; waitingFor: unknown; health_status: string }[];
      summary: { waiting: number };
    }>("list-agents", { teamName: "alpha", grouped: false }, "ses_lead");
    expect(listed.summary.waiting).toBe(1);
    for (const listing of listed.agents) expect(Object.keys(listing)).toContain("waitingFor");
    expect(listed.agents.find((a) => a.agent_id !== agent.agentId)?.waitingFor).toBeNull();

    await feed(monitor, replied(agent.sessionId, "per_other"));
    expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_1");
    await feed(monitor, replied(agent.sessionId));
    expect((await agentOnDisk(ctx, agent)).waitingFor).toBeNull();
    // A second request is a new notice.
    await feed(monitor, asked(agent.sessionId, "per_2"));
    expect(await notices()).toHaveLength(2);
  });

  test("a second process whose stream lags (a late idle, then the same request) does not tell the leader twice", async () => {
    await setUp();
    const agent = await worker();
    const idle = { type: "session.idle", properties: { sessionID: agent.sessionId } } as Event;
    const ahead = new EventMonitor(ctx);
    const behind = new EventMonitor(ctx);
    await feed(ahead, idle, asked(agent.sessionId));
    await feed(behind, idle);
    expect((await agentOnDisk(ctx, agent)).waitingFor).toBeNull();
    await feed(behind, asked(agent.sessionId));
    expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_1");
    expect(await notices()).toHaveLength(1);
  });

  test("after a gap in the stream, the server's pending lists set and clear waitingFor", async () => {
    await setUp();
    const asking = await worker();
    const answered = await worker({
      name: "worker-2",
      waitingFor: {
        kind: "permission",
        requestId: "per_old",
        title: "bash",
        since: new Date(0).toISOString(),
      },
    });
    ctx.server.pending = [
      {
        kind: "question",
        properties: { id: "que_9", sessionID: asking.sessionId, questions: [{ question: "Which branch?" }] },
      },
    ];
    await new EventMonitor(ctx).resync(ctx.server);
    expect((await agentOnDisk(ctx, asking)).waitingFor).toMatchObject({
      kind: "question",
      requestId: "que_9",
    });
    expect((await agentOnDisk(ctx, answered)).waitingFor).toBeNull();
    expect((await leaderInbox(ctx)).map((message) => message.text)).toEqual([
      `Agent worker-1 (${asking.agentId}) is waiting for an answer to its question: Which branch? Answer with answer-permission (requestId "que_9", message: <the answer>).`,
    ]);
  });

  test("an agent with a pane can also be answered there; a headless one cannot", async () => {
    await setUp();
    const request = { kind: "permission" as const, requestId: "per_1", title: "bash", pattern: "ls" };
    const inPane = waitingNotice(await worker({ headless: false, paneId: "%3" }), request);
    expect(inPane).toEndWith(
      'is waiting for permission: bash (ls). Answer with answer-permission (requestId "per_1"), or in its pane.',
    );
    expect(waitingNotice(await worker(), request)).toEndWith(
      'Answer with answer-permission (requestId "per_1").',
    );
  });

  test("an idle session waits on nothing, whatever reply the stream lost", async () => {
    await setUp();
    const agent = await worker();
    const monitor = new EventMonitor(ctx);
    await feed(monitor, asked(agent.sessionId));
    await feed(monitor, { type: "session.idle", properties: { sessionID: agent.sessionId } } as Event);
    expect((await agentOnDisk(ctx, agent)).waitingFor).toBeNull();
  });

  test('headlessPermissions "reject": a headless agent\'s request is rejected at once and the leader told', async () => {
    await setUp({ headlessPermissions: "reject" });
    const headless = await worker({ headless: true });
    const monitor = new EventMonitor(ctx);
    await feed(monitor, asked(headless.sessionId));
    expect(ctx.server.answers).toEqual([
      {
        request: { sessionId: headless.sessionId, requestId: "per_1", directory: headless.cwd },
        response: "reject",
      },
    ]);
    const texts = (await leaderInbox(ctx)).map((message) => message.text);
    expect(texts.some((text) => text.includes('headlessPermissions is "reject"'))).toBe(true);
  });
});

describe("the sweep and a waiting agent", () => {
  test("no misses and no busy cap while it waits; one reminder after waitingRemindMs", async () => {
    await setUp({
      busyCapMs: 60_000,
      staleThresholdMs: 10_000,
      sweepIntervalMs: 5_000,
      waitingRemindMs: 120_000,
    });
    const agent = await worker();
    const monitor = new EventMonitor(ctx);
    await feed(monitor, asked(agent.sessionId));
    const sweeper = new StaleSweeper(ctx);
    let reminders = 0;
    for (let i = 0; i < 60; i++) {
      ctx.clock.advance(5_000);
      const report = await sweeper.sweep();
      expect(report.inactive).toHaveLength(0);
      expect(report.misses).toBe(0);
      reminders += report.reminded;
    }
    const state = await agentOnDisk(ctx, agent);
    expect(state.status).toBe("active");
    expect(state.consecutiveMisses).toBe(0);
    expect(reminders).toBe(1);
    const reminder = (await leaderInbox(ctx)).filter((message) => message.text.startsWith("Reminder:"));
    expect(reminder).toHaveLength(1);
    expect(Date.parse(state.waitingFor?.remindedAt ?? "")).toBeGreaterThanOrEqual(
      Date.parse(state.waitingFor?.since ?? "") + 120_000,
    );
    // Answered: the busy cap applies again from the reply on.
    await feed(monitor, replied(agent.sessionId));
    let dead = 0;
    for (let i = 0; i < 40 && dead === 0; i++) {
      ctx.clock.advance(5_000);
      dead = (await sweeper.sweep()).inactive.length;
    }
    expect(dead).toBe(1);
  });
});

describe("answer-permission", () => {
  test("the leader's answer goes to the server for the pending request it names; none pending is a clear error", async () => {
    await setUp();
    const agent = await worker();
    const refused = await call<{ success: boolean; error: string }>(
      "answer-permission",
      { teamName: "alpha", agentId: agent.agentId, requestId: "per_1", response: "once" },
      "ses_lead",
    );
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("Nothing is pending for it now.");
    expect(ctx.server.answers).toHaveLength(0);

    await feed(new EventMonitor(ctx), asked(agent.sessionId));
    ctx.server.pending = [{ kind: "permission", properties: asked(agent.sessionId).properties }];
    const answered = await call<{ success: boolean; requestId: string }>(
      "answer-permission",
      { teamName: "alpha", agentId: agent.agentId, requestId: "per_1", response: "always" },
      "ses_lead",
    );
    expect(answered).toMatchObject({ success: true, requestId: "per_1" });
    expect(ctx.server.answers).toEqual([
      {
        request: { sessionId: agent.sessionId, requestId: "per_1", directory: agent.cwd },
        response: "always",
      },
    ]);
  });

  test("only the leader may answer", async () => {
    await setUp();
    const agent = await worker();
    await feed(new EventMonitor(ctx), asked(agent.sessionId));
    ctx.server.pending = [{ kind: "permission", properties: asked(agent.sessionId).properties }];
    const result = await call<{ success: boolean; error: string }>(
      "answer-permission",
      { teamName: "alpha", agentId: agent.agentId, requestId: "per_1", response: "once" },
      agent.sessionId,
    );
    expect(result.success).toBe(false);
    expect(result.error).toContain("Only the leader");
    expect(ctx.server.answers).toHaveLength(0);
  });

  test("a question needs the answer as message", async () => {
    await setUp();
    const agent = await worker();
    const question = {
      type: "question.asked",
      properties: { id: "que_1", sessionID: agent.sessionId, questions: [{ question: "Which branch?" }] },
    } as unknown as Event;
    await feed(new EventMonitor(ctx), question);
    ctx.server.pending = [{ kind: "question", properties: question.properties }];
    const answer = { teamName: "alpha", agentId: agent.agentId, requestId: "que_1", response: "once" };
    const missing = await call<{ success: boolean; error: string }>("answer-permission", answer, "ses_lead");
    expect(missing.error).toContain("pass the answer as message");
    await call("answer-permission", { ...answer, message: "main" }, "ses_lead");
    expect(ctx.server.answers.map((a) => a.response)).toEqual(["main"]);
  });
});

describe("pane watch", () => {
  test("needsSweep says so as soon as a known pane is gone, and for an agent no sweep has read yet", async () => {
    await setUp();
    const sweeper = new StaleSweeper(ctx);
    const agentId = uuidv4();
    const pane = await ctx.tmux.openAgentPane(agentId, "w1");
    await worker({
      agentId,
      headless: false,
      paneId: pane.paneId,
      tmux: { session: "s", window: "w", server: pane.server },
    });
    expect(await sweeper.needsSweep()).toBe(true);
    await sweeper.sweep();
    expect(await sweeper.needsSweep()).toBe(false);
    const fake = ctx.tmux.panes.get(pane.paneId);
    if (fake) fake.alive = false;
    expect(await sweeper.needsSweep()).toBe(true);
    const report = await sweeper.sweep();
    expect(report.inactive.map((dead) => dead.cause)).toEqual(["pane_gone"]);
  });

  test("agents the sweep cannot judge (damaged file, unreadable team) do not make the watch sweep every second", async () => {
    await setUp();
    const sweeper = new StaleSweeper(ctx);
    const agent = await worker();
    await writeFile(ctx.store.paths.agentState("alpha", agent.agentId), "{ damaged");
    await sweeper.sweep();
    expect(await sweeper.needsSweep()).toBe(false);
    await worker();
    await writeFile(ctx.store.paths.teamConfig("alpha"), "{ damaged");
    await sweeper.sweep();
    expect(await sweeper.needsSweep()).toBe(false);
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { deliverInboxMessage } from "../../src/operations/messages/delivery.ts";
import { HUMAN, sendAs } from "../../src/operations/messages/messages.ts";
import { flushNotices } from "../../src/operations/messages/notice-digest.ts";
import { deliverPending, notifyLeader } from "../../src/operations/messages/notify.ts";
import { type AgentState, InboxMessageSchema } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { leaderInbox, leadTeam, ledTeamContext, teamConfig } from "../helpers/team.ts";
import type { toolCaller } from "../helpers/tools.ts";

interface Sent {
  success: boolean;
  error?: string;
  messageId: string;
  deliveries: { agentId: string; name: string; messageId: string; delivery: string }[];
  warnings?: string[];
}

interface Read {
  success: boolean;
  error?: string;
  messages: { id: string; from: string; fromName?: string; type: string; text: string; read: boolean }[];
  unread: number;
}

const LEAD = "ses_lead";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let leaderSession: FakeSession;

beforeEach(async () => ({ ctx, call, leaderSession } = await ledTeamContext()));
afterEach(() => ctx.cleanup());

async function worker(name: string, overrides: Partial<AgentState> = {}) {
  const agent = await addAgent(ctx, "alpha", { name, ...overrides });
  const session = ctx.server.addSession({ id: agent.sessionId });
  return { agent, session };
}

const team = () => teamConfig(ctx);

const send = (args: Record<string, unknown>, session = LEAD) =>
  call<Sent>("send-message", { teamName: "alpha", ...args }, session);

describe("send-message: delivery by the recipient's state", () => {
  test("leader -> idle worker: a prompt that starts its turn, with sender, role and id in the header", async () => {
    const { agent, session } = await worker("w1");
    const sent = await send({ to: "w1", message: "also check the tests" });
    expect(sent).toMatchObject({
      success: true,
      deliveries: [{ agentId: agent.agentId, delivery: "prompted" }],
    });
    expect(session.prompts).toEqual([
      {
        text: `[message from leader (leader) via team alpha, id ${sent.messageId}]\n> also check the tests`,
        noReply: false,
      },
    ]);
    const [stored] = (await ctx.store.readInbox("alpha", agent.agentId)).items;
    expect(stored).toMatchObject({ id: sent.messageId, type: "message", deliveredAt: expect.any(String) });
  });

  test("worker -> leader reaches the leader's own session", async () => {
    const { agent } = await worker("w1");
    const sent = await send({ to: "leader", message: "which API version?" }, agent.sessionId);
    expect(sent.deliveries[0]?.delivery).toBe("prompted");
    expect(leaderSession.prompts[0]?.text).toBe(
      `[message from w1 (worker) via team alpha, id ${sent.messageId}]\n> which API version?`,
    );
  });

  test("busy recipient: queued, sent as a prompt so the running loop takes it (never an abort)", async () => {
    const { session } = await worker("w1");
    session.activity = "busy";
    const sent = await send({ to: "w1", message: "stop, the API changed" });
    expect(sent.deliveries[0]?.delivery).toBe("queued");
    expect(session.prompts).toHaveLength(1);
    expect(ctx.server.calls.some((c) => c.startsWith("abortSession"))).toBe(false);
  });

  test("wake: false puts it into an idle session without starting a turn", async () => {
    const { session } = await worker("w1");
    const sent = await send({ to: "w1", message: "fyi", wake: false });
    expect(sent.deliveries[0]?.delivery).toBe("queued");
    expect(session.prompts[0]?.noReply).toBe(true);
  });

  test("inactive recipient: stored in its inbox, not sent; the sweep leaves it alone", async () => {
    const { agent, session } = await worker("w1", { status: "inactive" });
    const sent = await send({ to: "w1", message: "when you are back" });
    expect(sent.deliveries[0]?.delivery).toBe("stored");
    expect(session.prompts).toHaveLength(0);
    expect(await deliverPending(ctx, await team(), new Set())).toBe(0);
    const [stored] = (await ctx.store.readInbox("alpha", agent.agentId)).items;
    expect(stored?.deliveredAt).toBeUndefined();
  });

  test("a spawning recipient: stored until it is active (its task prompt comes first), then the sweep delivers it", async () => {
    const { agent, session } = await worker("w1", { status: "spawning" });
    expect((await send({ to: "w1", message: "early" })).deliveries[0]?.delivery).toBe("stored");
    expect(session.prompts).toHaveLength(0);
    await ctx.store.updateAgent(
      "alpha",
      agent.agentId,
      (current) => current && { ...current, status: "active" },
    );
    expect(await deliverPending(ctx, await team(), new Set())).toBe(1);
    expect(session.prompts).toHaveLength(1);
  });

  test("broadcast: every running agent once, not the sender, not ended or inactive agents", async () => {
    const a = await worker("a");
    const b = await worker("b");
    const gone = await worker("c", { status: "terminated", outcome: "completed" });
    const away = await worker("d", { status: "inactive" });
    const sent = await send({ to: "all", message: "rebase on main" });
    expect(sent.deliveries.map((d) => d.name).sort()).toEqual(["a", "b"]);
    for (const { session } of [a, b]) expect(session.prompts).toHaveLength(1);
    for (const { session } of [gone, away]) expect(session.prompts).toHaveLength(0);
    const refused = await send({ to: "all", message: "hi" }, a.agent.sessionId);
    expect(refused).toMatchObject({ success: false, error: expect.stringContaining("Only the team leader") });
  });

  test("a human sends from the CLI as 'human'", async () => {
    const { session } = await worker("w1");
    const result = await sendAs(ctx, await team(), HUMAN, { to: "w1", message: "hello" });
    expect(result.success).toBe(true);
    expect(session.prompts[0]?.text).toStartWith("[message from human (human) via team alpha, id ");
  });
});

describe("send-message: refusals change nothing", () => {
  test("non-member, unknown recipient, ended recipient, oversize, self", async () => {
    const { agent } = await worker("w1");
    await worker("old", { status: "terminated", outcome: "interrupted" });
    expect(await send({ to: "w1", message: "x" }, "ses_stranger")).toMatchObject({
      success: false,
      error: expect.stringContaining("not a member"),
    });
    expect(await send({ to: "nobody", message: "x" })).toMatchObject({
      success: false,
      error: expect.stringContaining("one of: w1"),
    });
    expect(await send({ to: "old", message: "x" })).toMatchObject({
      success: false,
      error: expect.stringContaining("resume it first"),
    });
    expect(await send({ to: "w1", message: "x".repeat(16 * 1024 + 1) })).toMatchObject({
      success: false,
      error: expect.stringContaining("16384"),
    });
    expect(await send({ to: "w1", message: "x" }, agent.sessionId)).toMatchObject({
      success: false,
      error: expect.stringContaining("yourself"),
    });
    expect((await ctx.store.readInbox("alpha", agent.agentId)).items).toHaveLength(0);
  });

  test("more than 30 messages a minute from one sender are refused; the next minute is open again", async () => {
    const { session } = await worker("w1");
    for (let i = 0; i < 30; i++) expect((await send({ to: "w1", message: `m${i}` })).success).toBe(true);
    expect(await send({ to: "w1", message: "m30" })).toMatchObject({
      success: false,
      error: expect.stringContaining("30 messages in the last minute"),
    });
    expect(session.prompts).toHaveLength(30);
    ctx.clock.advance(61_000);
    expect((await send({ to: "w1", message: "later" })).success).toBe(true);
  });
});

describe("exactly once", () => {
  test("a crash between sending and marking: the retry finds the id in the session and does not send again", async () => {
    const { agent, session } = await worker("w1");
    const message = await ctx.store.appendInbox({
      teamName: "alpha",
      to: agent.agentId,
      from: HUMAN.agentId,
      fromName: "human",
      fromRole: "human",
      type: "message",
      text: "once",
      createdAt: new Date(ctx.clock.now()).toISOString(),
    });
    // The send went out, then the process died before marking it.
    const original = ctx.store.markInboxDelivered.bind(ctx.store);
    ctx.store.markInboxDelivered = async () => {
      throw new Error("crash");
    };
    await expect(deliverInboxMessage(ctx, await team(), message)).rejects.toThrow("crash");
    ctx.store.markInboxDelivered = original;
    expect(session.prompts).toHaveLength(1);
    expect(await deliverPending(ctx, await team(), new Set())).toBe(0);
    expect(session.prompts).toHaveLength(1);
    const [stored] = (await ctx.store.readInbox("alpha", agent.agentId)).items;
    expect(stored?.deliveredAt).toBeDefined();
  });

  test("a send that failed is retried by the sweep, once, by one of two sweepers", async () => {
    const { session } = await worker("w1");
    ctx.server.failPrompts = 1;
    const sent = await send({ to: "w1", message: "retry me" });
    expect(sent.deliveries[0]?.delivery).toBe("stored");
    expect(sent.warnings?.[0]).toContain("retried by the sweep");
    const delivered = await Promise.all([
      deliverPending(ctx, await team(), new Set()),
      deliverPending(ctx, await team(), new Set()),
    ]);
    expect(delivered.sort()).toEqual([0, 1]);
    expect(session.prompts).toHaveLength(1);
  });
});

describe("read-messages", () => {
  test("newest first, marks read, unreadOnly, from and limit", async () => {
    const a = await worker("a");
    const b = await worker("b");
    await send({ to: "leader", message: "first" }, a.agent.sessionId);
    ctx.clock.advance(1_000);
    await send({ to: "leader", message: "second" }, b.agent.sessionId);
    ctx.clock.advance(1_000);
    await send({ to: "leader", message: "third" }, a.agent.sessionId);

    const fromA = await call<Read>("read-messages", { teamName: "alpha", from: "a", limit: 1 }, LEAD);
    expect(fromA.messages.map((m) => m.text)).toEqual(["third"]);
    expect(fromA.messages[0]).toMatchObject({ from: a.agent.agentId, fromName: "a", read: false });
    expect(fromA.unread).toBe(1);
    const unread = await call<Read>("read-messages", { teamName: "alpha", unreadOnly: true }, LEAD);
    expect(unread.messages.map((m) => m.text)).toEqual(["second", "first"]);
    const all = await call<Read>("read-messages", { teamName: "alpha" }, LEAD);
    expect(all.messages.map((m) => [m.text, m.read])).toEqual([
      ["third", true],
      ["second", true],
      ["first", true],
    ]);
    expect(await call<Read>("read-messages", { teamName: "alpha" }, "ses_stranger")).toMatchObject({
      success: false,
    });
  });

  test("the leader's notices are in its inbox, from opencode-teams", async () => {
    await notifyLeader(ctx, await team(), { type: "agent_completed", text: "w1 completed." });
    const read = await call<Read>("read-messages", { teamName: "alpha", from: "opencode-teams" }, LEAD);
    expect(read.messages).toMatchObject([
      { from: "opencode-teams", type: "agent_completed", text: "w1 completed." },
    ]);
  });
});

describe("notice digest", () => {
  test("the first notice goes at once; the ones within the window go together as one message", async () => {
    const t = await team();
    await notifyLeader(ctx, t, { type: "agent_inactive", text: "n0" });
    expect(leaderSession.prompts).toHaveLength(1);
    for (let i = 1; i < 100; i++) {
      ctx.clock.advance(10);
      await notifyLeader(ctx, t, { type: "agent_inactive", text: `n${i}` });
    }
    expect(leaderSession.prompts).toHaveLength(1);
    ctx.clock.advance(3_000);
    // Two processes' timers fire at once: one sends the digest.
    const flushed = await Promise.all([flushNotices(ctx, t), flushNotices(ctx, t)]);
    expect(flushed.sort((x, y) => x - y)).toEqual([0, 99]);
    expect(leaderSession.prompts).toHaveLength(2);
    const digest = leaderSession.prompts[1]?.text ?? "";
    expect(digest.split("\n")[1]).toBe("99 notices: 99 became inactive");
    expect(digest).toContain("\nn1\n");
    expect(digest.endsWith("\nn99")).toBe(true);
    expect((await leaderInbox(ctx)).every((m) => m.deliveredAt)).toBe(true);
  });

  test("the window's end is flushed by this process's timer, without waiting for a sweep", async () => {
    const quick = await makeTestContext({ noticeDigestMs: 50 });
    try {
      const { leaderSession: lead, team: config } = await leadTeam(quick);
      await notifyLeader(quick, config, { type: "agent_inactive", text: "first" });
      await notifyLeader(quick, config, { type: "agent_inactive", text: "second" });
      expect(lead.prompts).toHaveLength(1);
      quick.clock.advance(50);
      await Bun.sleep(200);
      expect(lead.prompts).toHaveLength(2);
      expect(lead.prompts[1]?.text).toEndWith("\nsecond");
    } finally {
      await quick.cleanup();
    }
  });

  test("a digest sent but not marked (crash) is not sent again", async () => {
    const t = await team();
    await notifyLeader(ctx, t, { type: "agent_inactive", text: "n0" });
    // Simulate the crash: the notice carries its digest id and is in the session, but is not marked delivered.
    const [notice] = await leaderInbox(ctx);
    if (!notice) throw new Error("no notice");
    const { deliveredAt: _, file, ...unmarked } = notice;
    expect(unmarked.digestId).toBeDefined();
    // Before its mark a notice is in the inbox's own directory (the mark moves it into delivered/).
    await rm(file);
    await writeJson(ctx.store.inboxMessageFile(unmarked), InboxMessageSchema, unmarked);
    ctx.clock.advance(5_000);
    expect(await deliverPending(ctx, t, new Set())).toBe(1);
    expect(leaderSession.prompts).toHaveLength(1);
    expect((await leaderInbox(ctx))[0]?.deliveredAt).toBeDefined();
  });
});

/**
 * Nothing grows without bound: an inbox keeps the newest `inboxKeepRead` messages that reached their recipient
 * (delivered into its session or read with read-messages) and deletes older ones; a message that reached no one is
 * never deleted. A damaged or huge inbox stays readable.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { listInbox } from "../../src/operations/messages/inbox.ts";
import { HUMAN, MESSAGES_PER_MINUTE, sendAs } from "../../src/operations/messages/messages.ts";
import { notifyLeader } from "../../src/operations/messages/notify.ts";
import { type InboxMessage, InboxMessageSchema, SendLogSchema } from "../../src/state/schemas.ts";
import { createJson, readJson } from "../../src/state/store.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { ledTeamContext, teamConfig } from "../helpers/team.ts";
import type { toolCaller } from "../helpers/tools.ts";

const KEEP = 5;
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

beforeEach(async () => ({ ctx, call } = await ledTeamContext({ inboxKeepRead: KEEP, noticeDigestMs: 0 })));
afterEach(() => ctx.cleanup());

/** Seconds into the past at which the next old message was written: each call's messages are newer than the last's. */
let written = 0;

/**
 * `count` messages to `to` written as an earlier life of the team left them, hours ago, oldest first: where this
 * version keeps them (pending, `delivered/`, `read/`), or all in the inbox's own directory as an older version did.
 */
async function oldMessages(
  to: string,
  count: number,
  state: "read" | "delivered" | "unseen",
  type = "message",
  layout: "areas" | "older version" = "areas",
) {
  const made: InboxMessage[] = [];
  for (let i = 0; i < count; i++) {
    const at = new Date(ctx.clock.now() - 36_000_000 + written++ * 1_000).toISOString();
    const message: InboxMessage = {
      version: 1,
      id: uuidv4(),
      teamName: "alpha",
      to,
      from: HUMAN.agentId,
      fromName: "human",
      fromRole: "human",
      type: type as InboxMessage["type"],
      text: `${state} ${i}`,
      createdAt: at,
      ...(state === "unseen" ? {} : { deliveredAt: at }),
      ...(state === "read" ? { readAt: at } : {}),
    };
    const pending = ctx.store.inboxMessageFile(message);
    const file =
      state === "unseen" || layout === "older version"
        ? pending
        : path.join(path.dirname(pending), state, path.basename(pending));
    await mkdir(path.dirname(file), { recursive: true });
    await createJson(file, InboxMessageSchema, message, { durable: false });
    made.push(message);
  }
  return made;
}

const onDisk = async (agentId: string) =>
  (await ctx.store.readInbox("alpha", agentId)).items.map((message) => message.text).sort();

test("a send prunes the recipient's oldest read messages beyond the bound and keeps every unseen one", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1", status: "inactive" });
  await oldMessages(agent.agentId, 30, "read");
  await oldMessages(agent.agentId, 20, "delivered");
  const waiting = await oldMessages(agent.agentId, 3, "unseen");
  const sent = await sendAs(ctx, await teamConfig(ctx), HUMAN, { to: "w1", message: "new one" });
  expect(sent.success).toBe(true);
  const kept = await onDisk(agent.agentId);
  // The newest KEEP read ones, the newest KEEP delivered (not read) ones, and every one that reached no one.
  expect(kept).toEqual(
    ["read 25", "read 26", "read 27", "read 28", "read 29"]
      .concat(["delivered 15", "delivered 16", "delivered 17", "delivered 18", "delivered 19"])
      .concat(
        waiting.map((m) => m.text),
        ["new one"],
      )
      .sort(),
  );
});

test("read-messages shows the kept messages and leaves the inbox within the bound", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1" });
  await oldMessages(agent.agentId, 40, "read");
  const read = await call<{ success: boolean; messages: { text: string }[] }>(
    "read-messages",
    { teamName: "alpha", limit: 100 },
    agent.sessionId,
  );
  expect(read.success).toBe(true);
  expect(read.messages.map((m) => m.text)).toEqual(["read 39", "read 38", "read 37", "read 36", "read 35"]);
  expect(await onDisk(agent.agentId)).toHaveLength(KEEP);
});

test("an inbox an older version kept in one directory is sorted and bounded by the next read", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1" });
  await oldMessages(agent.agentId, 20, "read", "message", "older version");
  await oldMessages(agent.agentId, 20, "delivered", "message", "older version");
  const read = await call<{ success: boolean; messages: { text: string }[]; unread: number }>(
    "read-messages",
    { teamName: "alpha", limit: 3 },
    agent.sessionId,
  );
  expect(read).toMatchObject({ success: true, unread: KEEP - 3 });
  expect(read.messages.map((m) => m.text)).toEqual(["delivered 19", "delivered 18", "delivered 17"]);
  expect(await ctx.store.inboxFiles("alpha", agent.agentId)).toEqual([]);
  expect(await ctx.store.inboxFilesIn("alpha", agent.agentId, "delivered")).toHaveLength(KEEP - 3);
  expect(await ctx.store.inboxFilesIn("alpha", agent.agentId, "read")).toHaveLength(KEEP + 3);
});

test("the leader's delivered notices are bounded by the flush that delivers the next one", async () => {
  const team = await teamConfig(ctx);
  await oldMessages(team.leader, 25, "delivered", "agent_completed");
  await notifyLeader(ctx, team, { type: "agent_inactive", text: "fresh notice" });
  const kept = await onDisk(team.leader);
  // The flush pruned to the bound, then delivered the fresh notice: the next one prunes again.
  expect(kept).toHaveLength(KEEP + 1);
  expect(kept).toContain("fresh notice");
});

test("a huge inbox of unseen messages loses none of them, and read-messages still answers", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1", status: "spawning" });
  await oldMessages(agent.agentId, 600, "unseen");
  await sendAs(ctx, await teamConfig(ctx), HUMAN, { to: "w1", message: "one more" });
  expect(await onDisk(agent.agentId)).toHaveLength(601);
  const read = await call<{ success: boolean; messages: unknown[]; unread: number }>(
    "read-messages",
    { teamName: "alpha" },
    agent.sessionId,
  );
  expect(read).toMatchObject({ success: true, unread: 581 });
  expect(read.messages).toHaveLength(20);
});

test("damaged and oversized message files are moved aside with a warning; the rest is read", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1" });
  const [good] = await oldMessages(agent.agentId, 1, "unseen");
  if (!good) throw new Error("no message");
  const dir = ctx.store.paths.inboxDir("alpha", agent.agentId);
  await writeFile(`${dir}/2026-01-01T00-00-00-000Z-broken.json`, '{"version":1,"id":');
  await writeFile(`${dir}/2026-01-01T00-00-01-000Z-empty.json`, "");
  const huge = { ...good, id: uuidv4(), text: "x".repeat(3 * 1024 * 1024) };
  await writeFile(`${dir}/2026-01-01T00-00-02-000Z-huge.json`, JSON.stringify(huge));
  const read = await call<{ success: boolean; messages: { text: string }[]; warnings?: string[] }>(
    "read-messages",
    { teamName: "alpha" },
    agent.sessionId,
  );
  expect(read.success).toBe(true);
  expect(read.messages.map((m) => m.text)).toEqual([good.text]);
  expect(read.warnings?.join("\n")).toContain("broken.json");
  expect(read.warnings?.join("\n")).toContain("huge.json");
  expect((await listInbox(ctx, await teamConfig(ctx), agent.agentId)).items).toHaveLength(1);
});

test("a send log keeps only the last minute's sends, however long the sender talks", async () => {
  const team = await teamConfig(ctx);
  await addAgent(ctx, "alpha", { name: "w1" });
  for (let minute = 0; minute < 3; minute++) {
    for (let i = 0; i < 20; i++) await sendAs(ctx, team, HUMAN, { to: "w1", message: `m${minute}-${i}` });
    ctx.clock.advance(61_000);
  }
  const log = await readJson(ctx.store.paths.sendLog("alpha", HUMAN.agentId), SendLogSchema);
  expect(log.kind === "ok" ? log.value.sentAt.length : -1).toBeLessThanOrEqual(MESSAGES_PER_MINUTE);
});

test("read messages move to the inbox's read/, which keeps the newest of them; read-messages still shows them", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1", status: "spawning" });
  const team = await teamConfig(ctx);
  const sendOne = async (message: string) => {
    ctx.clock.advance(1_000);
    await sendAs(ctx, team, HUMAN, { to: "w1", message });
  };
  for (let i = 0; i < 8; i++) await sendOne(`first ${i}`);
  const read = (args: Record<string, unknown> = {}) =>
    call<{ messages: { text: string; read: boolean }[]; unread: number }>(
      "read-messages",
      { teamName: "alpha", limit: 100, ...args },
      agent.sessionId,
    );
  expect((await read()).messages).toHaveLength(8);
  // Only what is not read yet stays where the flush, the sweep and status look.
  expect(await ctx.store.inboxFiles("alpha", agent.agentId)).toEqual([]);
  expect(await ctx.store.inboxFilesIn("alpha", agent.agentId, "read")).toHaveLength(8);
  for (let i = 0; i < 3; i++) await sendOne(`second ${i}`);
  const again = await read();
  expect(again.messages.map((m) => [m.text, m.read])).toEqual([
    ["second 2", false],
    ["second 1", false],
    ["second 0", false],
    ["first 7", true],
    ["first 6", true],
    ["first 5", true],
    ["first 4", true],
    ["first 3", true],
  ]);
  expect((await read({ unreadOnly: true })).messages).toEqual([]);
  expect((await read({ limit: 2 })).messages.map((m) => m.text)).toEqual(["second 2", "second 1"]);
});

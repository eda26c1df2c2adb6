/**
 * Exactly once includes read-messages: a message its recipient has read with read-messages is never prompted into its
 * session afterwards. Before, a message stored for a spawning agent and read by it was delivered again by the sweep
 * once the agent was active, a notice the leader read while it waited for its digest window went out in the digest,
 * and a resume handed over messages the earlier run had read.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { storedMessages } from "../../src/operations/messages/inbox.ts";
import { flushNotices } from "../../src/operations/messages/notice-digest.ts";
import { deliverPending, notifyLeader } from "../../src/operations/messages/notify.ts";
import { InboxMessageSchema } from "../../src/state/schemas.ts";
import { readJson } from "../../src/state/store.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { ledTeamContext, teamConfig } from "../helpers/team.ts";
import type { toolCaller } from "../helpers/tools.ts";

const LEAD = "ses_lead";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let leaderSession: FakeSession;

beforeEach(async () => ({ ctx, call, leaderSession } = await ledTeamContext({ noticeDigestMs: 3_000 })));
afterEach(() => ctx.cleanup());

interface Read {
  success: boolean;
  messages: { id: string; text: string }[];
}

const read = (session: string, args: Record<string, unknown> = {}) =>
  call<Read>("read-messages", { teamName: "alpha", ...args }, session);
const send = (to: string, message: string) =>
  call<{ success: boolean; messageId: string }>("send-message", { teamName: "alpha", to, message }, LEAD);

/** A worker still spawning (its task prompt not confirmed yet): messages to it are stored. */
async function spawningWorker(name: string) {
  const agent = await addAgent(ctx, "alpha", { name, status: "spawning" });
  const session = ctx.server.addSession({ id: agent.sessionId });
  const activate = () =>
    ctx.store.updateAgent("alpha", agent.agentId, (current) => current && { ...current, status: "active" });
  return { agent, session, activate };
}

/**
 * Every prompt `server` sends is checked against the inbox file it came from at that instant: a message that was
 * already marked read must never be sent. Returns the violations seen.
 */
function watchPrompts(
  server: { promptAsync: (...args: never[]) => Promise<unknown> },
  inboxDir: () => Promise<string[]>,
) {
  const violations: string[] = [];
  const original = server.promptAsync.bind(server) as (...args: unknown[]) => Promise<unknown>;
  (server as { promptAsync: (...args: unknown[]) => Promise<unknown> }).promptAsync = async (...args) => {
    const text = String(args[1]);
    for (const file of await inboxDir()) {
      const message = await readJson(file, InboxMessageSchema);
      if (message.kind === "ok" && message.value.readAt && text.includes(message.value.id))
        violations.push(message.value.text);
      if (message.kind === "ok" && message.value.readAt && text.includes(message.value.text))
        violations.push(message.value.text);
    }
    return original(...args);
  };
  return violations;
}

test("a message a spawning agent read is not delivered by the sweep once it is active", async () => {
  const w1 = await spawningWorker("w1");
  const sent = await send("w1", "EARLY use v2");
  expect(sent.success).toBe(true);
  expect((await read(w1.agent.sessionId)).messages.map((m) => m.text)).toEqual(["EARLY use v2"]);
  await w1.activate();
  await deliverPending(ctx, await teamConfig(ctx), new Set());
  expect(w1.session.prompts.filter((p) => p.text.includes("EARLY"))).toEqual([]);
  // Nor does a resume hand it over.
  expect(await storedMessages(ctx, await teamConfig(ctx), w1.agent.agentId)).toEqual([]);
});

test("a notice the leader read while it waited for its digest window is not sent in the digest", async () => {
  const team = await teamConfig(ctx);
  await notifyLeader(ctx, team, { type: "agent_inactive", text: "FIRST agent a became inactive" });
  expect(leaderSession.prompts).toHaveLength(1);
  await notifyLeader(ctx, team, { type: "agent_completed", text: "SECOND agent b completed" });
  expect(leaderSession.prompts).toHaveLength(1);
  const seen = await read(LEAD);
  expect(seen.messages.map((m) => m.text)).toContain("SECOND agent b completed");
  ctx.clock.advance(5_000);
  await flushNotices(ctx, team);
  await deliverPending(ctx, team, new Set());
  expect(leaderSession.prompts.filter((p) => p.text.includes("SECOND"))).toEqual([]);
});

test("read-messages and a delivery at the same instant: a message is never prompted after it was marked read", async () => {
  const team = await teamConfig(ctx);
  const violations = watchPrompts(ctx.server, async () => {
    const owners = [...(await ctx.store.inboxOwners("alpha"))];
    return (await Promise.all(owners.map((id) => ctx.store.inboxFiles("alpha", id)))).flat();
  });
  for (let round = 0; round < 12; round++) {
    const w = await spawningWorker(`w${round}`);
    await send(w.agent.name, `RACE-${round}`);
    await w.activate();
    await Promise.all([read(w.agent.sessionId), deliverPending(ctx, team, new Set())]);
  }
  expect(violations).toEqual([]);
});

test("the leader's read-messages and a notice flush at the same instant: no notice is sent after it was read", async () => {
  const team = await teamConfig(ctx);
  const leaderFiles = () => ctx.store.inboxFiles("alpha", team.leader);
  const violations = watchPrompts(ctx.local, leaderFiles);
  for (let round = 0; round < 12; round++) {
    // The first opens a digest window; the second waits for its end, when the flush and the read race.
    await notifyLeader(ctx, team, { type: "agent_inactive", text: `OPENER-${round} gone` });
    await notifyLeader(ctx, team, { type: "agent_completed", text: `NOTICE-${round} done` });
    ctx.clock.advance(5_000);
    await Promise.all([read(LEAD), flushNotices(ctx, team)]);
  }
  expect(violations).toEqual([]);
});

test("in two processes: one agent reads while another process's sweep delivers; nothing read is sent", async () => {
  const team = await teamConfig(ctx);
  const workers = [];
  for (let i = 0; i < 24; i++) {
    const w = await spawningWorker(`p${i}`);
    await send(w.agent.name, `PROC-${i}`);
    await w.activate();
    workers.push(w);
  }
  const goFile = path.join(ctx.projectRoot, "go");
  const script = path.join(import.meta.dir, "fixtures", "delivery-racer.ts");
  const sessions = JSON.stringify(workers.map((w) => w.agent.sessionId));
  const racer = Bun.spawn([process.execPath, script, ctx.projectRoot, team.name, sessions, goFile], {
    stdout: "pipe",
    stderr: "pipe",
  });
  await Bun.sleep(1_500); // the other process loaded and polling
  await writeFile(goFile, "go");
  // The reads go one after another, each a few ms apart, while the other process sweeps.
  for (const w of workers) {
    await read(w.agent.sessionId);
    await Bun.sleep(Math.floor(Math.random() * 8));
  }
  const [out, err] = await Promise.all([
    new Response(racer.stdout).text(),
    new Response(racer.stderr).text(),
  ]);
  if ((await racer.exited) !== 0) throw new Error(`racer failed: ${err}`);
  const result = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as {
    delivered: number;
    violations: string[];
  };
  expect(result.violations).toEqual([]);
  console.log(`two processes: ${result.delivered} of 24 delivered before being read, the rest read first`);
}, 60_000);

import { readdir, rm } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { collectStatus } from "../src/cli/status.ts";
import { readMessages } from "../src/operations/messages/inbox.ts";
import { HUMAN, sendAs } from "../src/operations/messages/messages.ts";
import { notifyLeader } from "../src/operations/messages/notify.ts";
import { type InboxMessage, InboxMessageSchema, type TeamConfig } from "../src/state/schemas.ts";
import { createJson } from "../src/state/store.ts";
import { addAgent } from "../tests/helpers/agents.ts";
import { makeTestContext, type TestContext } from "../tests/helpers/context.ts";
import { leaderSession, note, seedTeam } from "./setup.ts";
import { type Figure, figure, zipRounds } from "./stats.ts";

const OLD_BIG = 10_000;
const OLD_SMALL = 10;

/** `count` messages that reached `to` a day ago (delivered and read), written straight to disk, oldest first. */
async function oldMessages(
  ctx: TestContext,
  teamName: string,
  to: string,
  count: number,
  type: InboxMessage["type"],
): Promise<void> {
  const start = ctx.clock.now() - 86_400_000;
  for (let first = 0; first < count; first += 64) {
    await Promise.all(
      Array.from({ length: Math.min(64, count - first) }, async (_, k) => {
        const at = new Date(start + (first + k) * 1_000).toISOString();
        const message: InboxMessage = {
          version: 1,
          id: uuidv4(),
          teamName,
          to,
          from: HUMAN.agentId,
          fromName: "human",
          fromRole: "human",
          type,
          text: `old message ${first + k}: ${"words ".repeat(30)}`,
          createdAt: at,
          deliveredAt: at,
          readAt: at,
        };
        await createJson(ctx.store.inboxMessageFile(message), InboxMessageSchema, message, {
          durable: false,
        });
      }),
    );
  }
}

/** The small side stays at its 10 old messages: what a round added is removed after it (untimed). */
async function trimTo(dir: string, count: number): Promise<void> {
  const names = (await readdir(dir)).filter((name) => name.endsWith(".json")).sort();
  await Promise.all(names.slice(count).map((name) => rm(path.join(dir, name), { force: true })));
}

interface Side {
  team: TeamConfig;
  workerId: string;
  workerSession: string;
}

/** A team whose leader's and worker's inboxes each received `old` messages, all delivered and read long ago. */
async function side(ctx: TestContext, teamName: string, old: number): Promise<Side> {
  await seedTeam(ctx, teamName, 3);
  const read = await ctx.store.readTeam(teamName);
  if (read.kind !== "ok") throw new Error(`team ${teamName} unreadable`);
  const worker = await addAgent(ctx, teamName, { name: "reader" });
  ctx.server.addSession({ id: worker.sessionId });
  ctx.local.addSession({ id: leaderSession(teamName) });
  await oldMessages(ctx, teamName, worker.agentId, old, "message");
  await oldMessages(ctx, teamName, read.value.leader, old, "agent_completed");
  return { team: read.value, workerId: worker.agentId, workerSession: worker.sessionId };
}

/** One round of the three operations on one side; what each took, in ms. */
async function round(ctx: TestContext, s: Side, run: number): Promise<[number, number, number]> {
  await sendAs(ctx, s.team, HUMAN, { to: s.workerId, message: `new message ${run}` });
  let started = performance.now();
  const read = await readMessages(ctx, { teamName: s.team.name }, s.workerSession);
  const readMs = performance.now() - started;
  if (!read.success || read.messages[0]?.text !== `new message ${run}`)
    throw new Error("read-messages failed");
  ctx.clock.advance(ctx.options.noticeDigestMs + 1);
  started = performance.now();
  const { delivered } = await notifyLeader(ctx, s.team, { type: "notice", text: `notice ${run}` });
  const flushMs = performance.now() - started;
  if (delivered !== 1) throw new Error("the notice was not flushed");
  started = performance.now();
  await collectStatus(ctx, s.team.name, false);
  return [readMs, flushMs, performance.now() - started];
}

/**
 * 11. Inboxes that received 10,000 messages, all delivered and read, against inboxes that received 10: read-messages
 * of the worker (one new message in it), a notice flushed to the leader, and `status` of the team (what `watch`
 * redraws). The 10,000 are written straight to disk as a long life (or a version without the bound) leaves them; the
 * first call prunes them to the bound (its cost is noted), the rounds after it are timed. Floor, by turns in the same
 * run: the same three on the team with 10 (its inboxes trimmed back to 10 after each round).
 */
export async function benchInbox(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 10 : 40;
  const ctx = await makeTestContext();
  const big: number[][] = [[], [], []];
  const small: number[][] = [[], [], []];
  let firstMs = 0;
  try {
    const bigSide = await side(ctx, "inbox-big", OLD_BIG);
    const smallSide = await side(ctx, "inbox-small", OLD_SMALL);
    const started = performance.now();
    await round(ctx, bigSide, -1);
    firstMs = performance.now() - started;
    await round(ctx, smallSide, -1);
    for (let run = 0; run < runs; run++) {
      for (const [s, into] of [
        [bigSide, big],
        [smallSide, small],
      ] as const) {
        const times = await round(ctx, s, run);
        for (const [i, ms] of times.entries()) into[i]?.push(ms);
      }
      for (const id of [smallSide.workerId, smallSide.team.leader])
        await trimTo(ctx.store.paths.inboxDir("inbox-small", id), OLD_SMALL);
    }
  } finally {
    await ctx.cleanup();
  }
  note(`inbox: ${runs} rounds; the first call on the 10,000 (pruning them) took ${firstMs.toFixed(0)} ms`);
  const names = ["read-messages", "notice flush to the leader", "status of the team"];
  const ids = ["11a", "11b", "11c"];
  return names.map((name, i) =>
    figure(
      ids[i] ?? "11",
      `${name}, inboxes that received ${OLD_BIG} read messages`,
      "ms",
      big[i] ?? [],
      {
        floor: {
          what: `the same with ${OLD_SMALL}`,
          samples: small[i] ?? [],
          pairs: zipRounds(big[i] ?? [], small[i] ?? []),
          maxRatio: 2,
        },
      },
      `inboxKeepRead ${ctx.options.inboxKeepRead} (default); real storage, fake server answering at once`,
    ),
  );
}

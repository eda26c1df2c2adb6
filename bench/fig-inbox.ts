import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { collectStatus } from "../src/cli/status.ts";
import { readMessages } from "../src/operations/messages/inbox.ts";
import { keptFiles } from "../src/operations/messages/inbox-bound.ts";
import { HUMAN, sendAs } from "../src/operations/messages/messages.ts";
import { notifyLeader } from "../src/operations/messages/notify.ts";
import { messagePath } from "../src/state/inbox-files.ts";
import { type InboxMessage, InboxMessageSchema, type TeamConfig } from "../src/state/schemas.ts";
import { createJson } from "../src/state/store.ts";
import { addAgent } from "../tests/helpers/agents.ts";
import { makeTestContext, type TestContext } from "../tests/helpers/context.ts";
import { leaderSession, note, seedTeam } from "./setup.ts";
import { type Figure, figure, zipRounds } from "./stats.ts";

const OLD_BIG = 10_000;
const OLD_SMALL = 10;

/**
 * `count` messages that reached `to` over a long life, oldest first: the worker's read, the leader's notices delivered
 * and never read (written where the plugin leaves them, `read/`, `delivered/`). Written straight to disk 100 at a time, each
 * hundred followed by the pruning the plugin does on its next read or flush, so the directories are what such a life
 * leaves (one that once held 10,000 entries stays slower to list on ext4, which no living inbox reaches).
 */
async function oldMessages(
  ctx: TestContext,
  teamName: string,
  to: string,
  count: number,
  type: "message" | "agent_completed",
): Promise<void> {
  const start = ctx.clock.now() - 86_400_000;
  const read = type === "message";
  const dir = ctx.store.paths.inboxDir(teamName, to);
  for (let first = 0; first < count; first += 100) {
    await writeBatch(start, first, Math.min(100, count - first), { teamName, to, type, read, dir });
    await keptFiles(ctx, teamName, to, read ? "read" : "delivered");
  }
}

async function writeBatch(
  start: number,
  first: number,
  count: number,
  where: { teamName: string; to: string; type: InboxMessage["type"]; read: boolean; dir: string },
): Promise<void> {
  const { teamName, to, type, read, dir } = where;
  const area = path.join(dir, read ? "read" : "delivered");
  await mkdir(area, { recursive: true });
  for (let batch = 0; batch < count; batch += 64) {
    await Promise.all(
      Array.from({ length: Math.min(64, count - batch) }, async (_, j) => {
        const k = batch + j;
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
          ...(read ? { readAt: at } : {}),
        };
        await createJson(messagePath(area, message), InboxMessageSchema, message, { durable: false });
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

/** A team whose worker read `old` messages and whose leader got `old` notices, long ago (see oldMessages). */
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
 * 11. A team whose worker has read 10,000 messages and whose leader got 10,000 notices, against one with 10 of each:
 * read-messages of the worker (one new message in it, default limit), a notice flushed to the leader, and `status` of
 * the team (what `watch` redraws). Floor, by turns in the same run: the same three on the team with 10 (its inboxes
 * trimmed back to 10 after each round).
 */
export async function benchInbox(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 10 : 40;
  const ctx = await makeTestContext();
  const big: number[][] = [[], [], []];
  const small: number[][] = [[], [], []];
  try {
    const bigSide = await side(ctx, "inbox-big", OLD_BIG);
    const smallSide = await side(ctx, "inbox-small", OLD_SMALL);
    // One unmeasured round each: the first read of a context's files.
    await round(ctx, bigSide, -1);
    await round(ctx, smallSide, -1);
    for (let run = 0; run < runs; run++) {
      for (const [s, into] of [
        [bigSide, big],
        [smallSide, small],
      ] as const) {
        const times = await round(ctx, s, run);
        for (const [i, ms] of times.entries()) into[i]?.push(ms);
      }
      const smallDir = (id: string) => ctx.store.paths.inboxDir("inbox-small", id);
      await trimTo(path.join(smallDir(smallSide.workerId), "read"), OLD_SMALL);
      await trimTo(path.join(smallDir(smallSide.team.leader), "delivered"), OLD_SMALL);
    }
  } finally {
    await ctx.cleanup();
  }
  note(`inbox: ${runs} rounds`);
  const names = ["read-messages, 10k old", "notice flush, 10k old", "CLI status, 10k old"];
  const ids = ["12a", "12b", "12c"];
  return names.map((name, i) =>
    figure(
      ids[i] ?? "12",
      name,
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
      `${OLD_BIG} old messages against ${OLD_SMALL} (worker: read; leader: notices delivered, never read); ` +
        `inboxKeepRead ${ctx.options.inboxKeepRead} (default); real storage, fake server answering at once`,
    ),
  );
}

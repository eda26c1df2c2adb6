import { v4 as uuidv4 } from "uuid";
import { isoNow } from "../../clock.ts";
import type { FiledMessage } from "../../state/inbox-files.ts";
import type { InboxMessage, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { serverWithSession, sessionShows } from "./delivery.ts";
import { readPending } from "./inbox-bound.ts";

/** Sender of notices the plugin itself writes (as opposed to an agent). */
export const SYSTEM_SENDER = "opencode-teams";

/** One pending flush per team and process: the one that closes the current digest window. */
const scheduled = new Set<string>();

function digestHeader(team: TeamConfig, digestId: string): string {
  return `[notice from ${SYSTEM_SENDER} via team ${team.name}, id ${digestId}]`;
}

const TYPE_WORDS: Record<string, string> = {
  agent_inactive: "became inactive",
  agent_completed: "completed",
  agent_failed: "failed",
  agent_timeout: "timed out",
  agent_failing: "failing",
};

/** "3 notices: 2 became inactive, 1 completed" - the line the leader reads first when notices come together. */
function digestSummary(notices: readonly InboxMessage[]): string {
  const counts = new Map<string, number>();
  for (const notice of notices) {
    const agents = Array.isArray(notice.data?.agents) ? notice.data.agents.length : 1;
    const word = TYPE_WORDS[notice.type] ?? "other";
    counts.set(word, (counts.get(word) ?? 0) + agents);
  }
  const parts = [...counts].map(([word, count]) => `${count} ${word}`);
  return `${notices.length} notices: ${parts.join(", ")}`;
}

export function digestText(team: TeamConfig, digestId: string, notices: readonly InboxMessage[]): string {
  const body = notices.map((notice) => notice.text).join("\n");
  if (notices.length === 1) return `${digestHeader(team, digestId)}\n${body}`;
  return `${digestHeader(team, digestId)}\n${digestSummary(notices)}\n${body}`;
}

function isNotice(message: InboxMessage): boolean {
  return message.type !== "message";
}

/** Notices not in the leader's session yet and not read with read-messages (which marks under the digest lock). */
async function pendingNotices(ctx: TeamsContext, team: TeamConfig): Promise<FiledMessage[]> {
  const { items } = await readPending(ctx, team.name, team.leader);
  // readPending leaves out what reached the leader already.
  return items.filter(isNotice);
}

function flushKey(ctx: TeamsContext, team: TeamConfig): string {
  return `${ctx.store.paths.root}\0${team.name}`;
}

/** Whether this process already waits for the current window's end: a notice written now goes with that flush. */
export function flushScheduled(ctx: TeamsContext, team: TeamConfig): boolean {
  return scheduled.has(flushKey(ctx, team));
}

/** How far a last-sent time may lie ahead of this clock (processes' clocks differ a little) and still hold a window. */
const CLOCK_SKEW_MS = 2_000;

/**
 * How long ago the last digest went out. A time further in the future than a small skew (a clock stepped back, a
 * hand-edited file) or one that does not parse counts as long ago: it must never hold an agent's death back.
 */
function sinceLastDigest(lastSentAt: string | undefined, now: number): number {
  const sent = lastSentAt === undefined ? Number.NaN : Date.parse(lastSentAt);
  if (!Number.isFinite(sent) || sent - now > CLOCK_SKEW_MS) return Number.POSITIVE_INFINITY;
  return Math.max(0, now - sent);
}

/**
 * Arrange for this process to flush again once the window that started at the last digest is over. The wait is in the
 * background: a process that exits with a flush pending leaves it to the sweep of another one.
 */
function schedule(ctx: TeamsContext, team: TeamConfig, delayMs: number): void {
  const key = flushKey(ctx, team);
  if (scheduled.has(key)) return;
  scheduled.add(key);
  void ctx.clock
    .sleep(delayMs, undefined, { background: true })
    .then(() => {
      scheduled.delete(key);
      // Read afresh: the team may have gone (its directory must not be recreated by the lock) or changed its leader.
      return ctx.store.readTeam(team.name);
    })
    .then((current) => (current.kind === "ok" ? flushNotices(ctx, current.value) : 0))
    .catch((error: unknown) => {
      ctx.log("warn", "flushing the leader's notices failed; the sweep retries", {
        team: team.name,
        error: error instanceof Error ? error.message : String(error),
      });
    });
}

/**
 * Put the leader's undelivered notices into its session as one message, at most once per `noticeDigestMs`: the first
 * notice after a quiet window goes at once, the ones that follow within the window wait for its end and go together.
 * Runs under the team's digest lock, so of several processes one sends each notice. A notice carries the id of the
 * digest that took it before the digest is sent: a retry finds that id in the session instead of sending it again.
 * Returns how many notices reached the session.
 */
export async function flushNotices(ctx: TeamsContext, team: TeamConfig): Promise<number> {
  const digests = ctx.store.noticeDigest;
  return digests.withLock(team.name, async () => {
    const now = ctx.clock.now();
    const since = sinceLastDigest(await digests.lastSentAt(team.name), now);
    if (since < ctx.options.noticeDigestMs) {
      schedule(ctx, team, Math.min(ctx.options.noticeDigestMs, ctx.options.noticeDigestMs - since));
      return 0;
    }
    const pending = await pendingNotices(ctx, team);
    if (pending.length === 0) return 0;
    const server = await serverWithSession(ctx, team.leaderSessionId);
    if (!server) return 0;
    const target = { server, sessionId: team.leaderSessionId };
    const settled = await settleEarlierDigests(ctx, team, target, pending);
    const fresh = pending.filter((notice) => !settled.has(notice.id));
    if (fresh.length > 0) {
      const digestId = uuidv4();
      await ctx.store.markInboxMessages(fresh, { digestId });
      await server.promptAsync(team.leaderSessionId, digestText(team, digestId, fresh), { noReply: true });
      await ctx.store.markInboxMessages(fresh, { digestId, deliveredAt: isoNow(ctx.clock) });
      await digests.recordSent(team.name, isoNow(ctx.clock));
    }
    return pending.length;
  });
}

/** Notices an earlier attempt already sent (its digest id is in the session): marked delivered, not sent again. */
async function settleEarlierDigests(
  ctx: TeamsContext,
  team: TeamConfig,
  target: Parameters<typeof sessionShows>[0],
  pending: readonly FiledMessage[],
): Promise<Set<string>> {
  const settled = new Set<string>();
  const digestIds = new Set(pending.flatMap((notice) => (notice.digestId ? [notice.digestId] : [])));
  for (const digestId of digestIds) {
    if (!(await sessionShows(target, digestHeader(team, digestId)))) continue;
    const sent = pending.filter((notice) => notice.digestId === digestId);
    await ctx.store.markInboxMessages(sent, { digestId, deliveredAt: isoNow(ctx.clock) });
    for (const notice of sent) settled.add(notice.id);
  }
  return settled;
}

import { boundText, NOTICE_TEXT_MAX } from "../../bounded-text.ts";
import { isoNow } from "../../clock.ts";
import type { InboxMessage, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { deliverInboxMessage } from "./delivery.ts";
import { keepInboxBounded } from "./inbox-bound.ts";
import { flushNotices, flushScheduled, SYSTEM_SENDER } from "./notice-digest.ts";

export { SYSTEM_SENDER };

/**
 * Append a notice to the leader's inbox and flush the leader's notices: it reaches the leader's session at once when
 * no digest went out within `noticeDigestMs`, else together with the others when that window ends. Returns how many
 * notices this call put into the session (0: it waits for the window, or the leader is unreachable and the sweep
 * retries).
 */
export async function notifyLeader(
  ctx: TeamsContext,
  team: TeamConfig,
  notice: Pick<InboxMessage, "type" | "text"> & { data?: Record<string, unknown> },
): Promise<{ message: InboxMessage; delivered: number }> {
  const message = await ctx.store.appendInbox({
    teamName: team.name,
    to: team.leader,
    from: SYSTEM_SENDER,
    type: notice.type,
    // It may quote agents' words (summaries, task titles, requests): one notice never floods the leader's context.
    text: boundText(notice.text, NOTICE_TEXT_MAX, "get-agent-status and list-tasks show the current state"),
    createdAt: isoNow(ctx.clock),
    ...(notice.data ? { data: notice.data } : {}),
  });
  await keepInboxBounded(ctx, team.name, team.leader);
  let delivered = 0;
  try {
    // A burst of notices (many deaths in one sweep pass) does not queue on the digest lock for a flush already due.
    if (!flushScheduled(ctx, team)) delivered = await flushNotices(ctx, team);
  } catch (error) {
    ctx.log("warn", "delivering a notice to the leader failed; a later sweep retries it", {
      team: team.name,
      message: message.id,
      error: error instanceof Error ? error.message : String(error),
    });
  }
  return { message, delivered };
}

/** A damaged inbox message found with no tool call to report it to: logged here; the store notes it for the next listing. */
function logDamage(ctx: TeamsContext, team: TeamConfig, warning: string): void {
  ctx.log("warn", "a damaged inbox message was moved aside", { team: team.name, warning });
}

/**
 * Inboxes that can take deliveries now, with the running agent that takes them: the leader's, each running agent's,
 * and those of the runs it resumes. A message written to a run that a parallel resume was ending, after the resume
 * read its stored messages, stays in the old run's inbox: the successor's sweep hands it over.
 */
async function liveInboxes(
  ctx: TeamsContext,
  team: TeamConfig,
): Promise<{ inbox: string; recipient: string }[]> {
  // Only inboxes that exist can hold anything: one listing of the team's inbox folder spares a sweep of a thousand
  // agents a thousand directory reads and chain walks when few of them ever got a message.
  const withMail = await ctx.store.inboxOwners(team.name);
  const inboxes = withMail.has(team.leader) ? [{ inbox: team.leader, recipient: team.leader }] : [];
  if (withMail.size === inboxes.length) return inboxes;
  const { items } = await ctx.store.listAgentViews(team.name);
  // The records a live agent resumes, walked in memory (the same chain as inboxChain, from one listing).
  const resumesOf = new Map(items.map(({ state }) => [state.agentId, state.resumes]));
  for (const { state } of items) {
    if (state.role === "leader" || !isLive(state.status)) continue;
    const seen = new Set<string>();
    for (
      let id: string | undefined = state.agentId;
      id && !seen.has(id) && seen.size < 20;
      id = resumesOf.get(id)
    ) {
      seen.add(id);
      if (withMail.has(id)) inboxes.push({ inbox: id, recipient: state.agentId });
    }
  }
  return inboxes;
}

/**
 * Retry what was not delivered: the leader's notices (through the digest) and members' messages. `settled` remembers
 * file names already delivered, so a long-lived inbox is not re-parsed on every sweep. Returns how many reached a
 * session.
 */
export async function deliverPending(
  ctx: TeamsContext,
  team: TeamConfig,
  settled: Set<string>,
): Promise<number> {
  let delivered = 0;
  let noticesPending = false;
  for (const { inbox, recipient } of await liveInboxes(ctx, team)) {
    for (const file of await ctx.store.inboxFiles(team.name, inbox)) {
      if (settled.has(file)) continue;
      const read = await ctx.store.readInboxMessage(team.name, file);
      if (read.kind === "corrupt") logDamage(ctx, team, read.warning);
      if (read.kind !== "ok" || read.value.deliveredAt || read.value.readAt) {
        settled.add(file);
        continue;
      }
      if (read.value.type !== "message") {
        noticesPending = true;
        continue;
      }
      const outcome = await deliverInboxMessage(ctx, team, { ...read.value, file }, recipient).catch(
        () => undefined,
      );
      if (outcome?.outcome === "delivered") delivered++;
      if (outcome && outcome.outcome !== "stored") settled.add(file);
      // The recipient cannot be reached from here; its other messages would fail the same way.
      if (!outcome || outcome.outcome === "stored") break;
    }
  }
  if (noticesPending) delivered += await flushNotices(ctx, team).catch(() => 0);
  return delivered;
}

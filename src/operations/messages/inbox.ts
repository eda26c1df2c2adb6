import path from "node:path";
import { isoNow } from "../../clock.ts";
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { FiledMessage } from "../../state/inbox-files.ts";
import type { Listed } from "../../state/listed.ts";
import { assertTeamName } from "../../state/paths.ts";
import type { InboxMessage, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, type OpResult } from "../result.ts";
import { loadTeam, requireMember } from "../team/identity.ts";
import { messageHeader, renderMessage, sessionShows } from "./delivery.ts";
import { keptFiles, readPending } from "./inbox-bound.ts";

export const READ_LIMIT_DEFAULT = 20;
export const READ_LIMIT_MAX = 100;

export interface ReadMessagesInput {
  teamName: string;
  unreadOnly?: boolean;
  from?: string;
  limit?: number;
}

export interface MessageView {
  id: string;
  from: string;
  fromName?: string;
  type: string;
  time: string;
  text: string;
  delivered: boolean;
  /** Whether it had been read before this call. */
  read: boolean;
}

export interface ReadMessagesOutput {
  messages: MessageView[];
  /** Unread messages left after this call (beyond `limit`). */
  unread: number;
  warnings?: string[];
}

/** The inbox ids of `agentId` and of the runs it resumes (messages stored for an earlier run stay in its inbox). */
export async function inboxChain(ctx: TeamsContext, team: TeamConfig, agentId: string): Promise<string[]> {
  const chain = [agentId];
  let current = agentId;
  while (chain.length < 20) {
    const read = await ctx.store.readAgent(team.name, current);
    const previous = read.kind === "ok" ? read.value.resumes : undefined;
    if (!previous || chain.includes(previous)) break;
    chain.push(previous);
    current = previous;
  }
  return chain;
}

/** `newest`: how many messages the caller can use at most (read-messages' limit); all when absent. */
export interface InboxFilter {
  unreadOnly?: boolean;
  from?: string;
  newest?: number;
}

/** `unlisted`: messages delivered and not read that were left unread from disk, all older than the ones listed. */
export type InboxListing = Listed<FiledMessage> & { unlisted: number };

/**
 * The inbox of `agentId` (and its earlier runs), newest first, filtered. Nothing is marked; messages beyond the bound
 * are deleted (inbox-bound.ts). The pending messages are read whole; of the delivered and read ones only the newest,
 * until `newest` of them matched: what a call costs does not grow with the old messages an inbox keeps.
 */
export async function listInbox(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  filter: InboxFilter = {},
): Promise<InboxListing> {
  const from = filter.from === "leader" ? team.leader : filter.from;
  const matches = (message: InboxMessage) =>
    (!filter.unreadOnly || !message.readAt) && (!from || message.from === from || message.fromName === from);
  const items: FiledMessage[] = [];
  const warnings: string[] = [];
  const older: { file: string; unread: boolean }[] = [];
  for (const id of await inboxChain(ctx, team, agentId)) {
    const pending = await readPending(ctx, team.name, id);
    items.push(...pending.items.filter(matches));
    warnings.push(...pending.warnings);
    for (const file of await keptFiles(ctx, team.name, id, "delivered")) older.push({ file, unread: true });
    if (filter.unreadOnly) continue;
    for (const file of await keptFiles(ctx, team.name, id, "read")) older.push({ file, unread: false });
  }
  // With a sender filter, every delivered message is read: how many unread ones match is only known that way.
  const read = await newestOf(ctx, team.name, older, matches, from ? undefined : filter.newest);
  items.push(...read.items);
  warnings.push(...read.warnings);
  items.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  return { items, warnings, unlisted: read.unlisted };
}

/**
 * Of delivered and read messages' files, those that match, read newest first a batch at a time until `want` of them
 * matched; `unlisted` counts the delivered (unread) files left unread from disk.
 */
async function newestOf(
  ctx: TeamsContext,
  teamName: string,
  files: readonly { file: string; unread: boolean }[],
  matches: (message: InboxMessage) => boolean,
  want = Number.POSITIVE_INFINITY,
): Promise<InboxListing> {
  const order = [...files].sort((a, b) => (path.basename(a.file) < path.basename(b.file) ? 1 : -1));
  const batch = Number.isFinite(want) ? Math.max(1, want) : 32;
  const items: FiledMessage[] = [];
  const warnings: string[] = [];
  let start = 0;
  for (; start < order.length && items.length < want; start += batch) {
    const chunk = order.slice(start, start + batch).map(({ file }) => file);
    const listed = await ctx.store.readInboxFiles(teamName, chunk);
    items.push(...listed.items.filter(matches));
    warnings.push(...listed.warnings);
  }
  const unlisted = order.slice(start).filter(({ unread }) => unread).length;
  return { items, warnings, unlisted };
}

/**
 * Set `field` to now on messages that do not have it yet; only a delivery mark is flushed to disk. One listed with it
 * is skipped without taking its lock: a mark is never taken back.
 */
function markMessages(
  ctx: TeamsContext,
  messages: readonly FiledMessage[],
  field: "readAt" | "attemptedAt" | "deliveredAt",
): Promise<void> {
  return ctx.store.markInboxMessages(
    messages.filter((message) => message[field] === undefined),
    { [field]: isoNow(ctx.clock) },
    { unlessSet: field, durable: field === "deliveredAt" },
  );
}

/** Messages kept for `agentId` (and the runs it resumes) that never reached its session nor were read, oldest first. */
export async function storedMessages(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
): Promise<FiledMessage[]> {
  const items: FiledMessage[] = [];
  // Only the pending place: a delivered or read message is never handed over.
  for (const id of await inboxChain(ctx, team, agentId))
    items.push(...(await readPending(ctx, team.name, id)).items);
  items.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  return items.filter((message) => message.type === "message");
}

/**
 * The stored messages a resume prompt hands over. Into a reused session, one whose delivery was attempted (by a send
 * or an earlier resume that died before marking it) and that the session already shows is marked delivered instead:
 * handing it over again would show the model the same message twice.
 */
export async function messagesToHandOver(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  reused: { server: OpencodeApi; sessionId: string } | undefined,
): Promise<FiledMessage[]> {
  const stored = await storedMessages(ctx, team, agentId);
  if (!reused) return stored;
  const shown: FiledMessage[] = [];
  for (const message of stored) {
    // When the session cannot be read, hand it over: a message seen twice is better than one never seen.
    if (message.attemptedAt && (await sessionShows(reused, messageHeader(message)).catch(() => false)))
      shown.push(message);
  }
  await markMessages(ctx, shown, "deliveredAt");
  return stored.filter((message) => !shown.includes(message));
}

/**
 * Marked before the resume prompt goes out: a process that dies after sending it and before marking the messages
 * delivered loses only that mark, and the next attempt finds the messages in the session.
 */
export function markHandOverAttempted(ctx: TeamsContext, messages: readonly FiledMessage[]): Promise<void> {
  return markMessages(ctx, messages, "attemptedAt");
}

/** The part of a resume prompt that hands stored messages over, each with its usual header. */
export function handOverText(messages: readonly InboxMessage[]): string {
  if (messages.length === 0) return "";
  return [
    `Messages that reached your inbox while you were stopped (${messages.length}, oldest first):`,
    ...messages.map(renderMessage),
  ].join("\n\n");
}

/** Stored messages that went out in a resume prompt count as delivered. */
export function markHandedOver(ctx: TeamsContext, messages: readonly FiledMessage[]): Promise<void> {
  return markMessages(ctx, messages, "deliveredAt");
}

export function viewOf(message: InboxMessage): MessageView {
  return {
    id: message.id,
    from: message.from,
    ...(message.fromName ? { fromName: message.fromName } : {}),
    type: message.type,
    time: message.createdAt,
    text: message.text,
    delivered: message.deliveredAt !== undefined,
    read: message.readAt !== undefined,
  };
}

/** read-messages: the caller's own inbox, newest first; what it returns is marked read. */
export async function readMessages(
  ctx: TeamsContext,
  input: ReadMessagesInput,
  callerSessionId: string,
): Promise<OpResult<ReadMessagesOutput>> {
  assertTeamName(input.teamName);
  const limit = input.limit ?? READ_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > READ_LIMIT_MAX) {
    throw new CallerError(`limit must be a whole number from 1 to ${READ_LIMIT_MAX}`);
  }
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, callerSessionId);
  const readAndMark = async () => {
    const listed = await listInbox(ctx, team, caller.agentId, { ...input, newest: limit });
    // Each mark holds the message file's lock, which a delivery holds while it checks and sends.
    await markMessages(ctx, listed.items.slice(0, limit), "readAt");
    return listed;
  };
  // The leader's notices go out in digests, which hold the team's digest lock rather than each notice's: a read
  // under that lock is either before the digest took the notices (then the digest leaves them out) or after it.
  const { items, warnings, unlisted } = caller.isLeader
    ? await ctx.store.noticeDigest.withLock(team.name, readAndMark)
    : await readAndMark();
  const returned = items.slice(0, limit);
  const unread = items.slice(limit).filter((message) => !message.readAt).length + unlisted;
  return {
    success: true,
    messages: returned.map(viewOf),
    unread,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

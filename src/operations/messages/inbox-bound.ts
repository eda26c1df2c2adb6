import type { InboxMessage } from "../../state/schemas.ts";
import type { FiledMessage, Listed } from "../../state/team-store.ts";
import type { TeamsContext } from "../context.ts";

/** It reached its recipient: put into its session (or handed over by a resume), or returned by read-messages. */
export function reachedRecipient(message: InboxMessage): boolean {
  return message.deliveredAt !== undefined || message.readAt !== undefined;
}

function newestFirst(a: FiledMessage, b: FiledMessage): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a.file < b.file ? 1 : a.file > b.file ? -1 : 0;
}

/**
 * `items` (one inbox's messages not read yet, read whole) without those that reached their recipient (delivered)
 * beyond the newest `inboxKeepRead` of them, which are deleted. A message that reached no one is always kept.
 */
export async function pruneInbox(ctx: TeamsContext, items: FiledMessage[]): Promise<FiledMessage[]> {
  const reached = items.filter(reachedRecipient);
  if (reached.length <= ctx.options.inboxKeepRead) return items;
  const dropped = new Set(reached.sort(newestFirst).slice(ctx.options.inboxKeepRead));
  await ctx.store.removeInboxMessages([...dropped]);
  return items.filter((message) => !dropped.has(message));
}

/**
 * One inbox's messages not read yet, kept within the bound: what a flush or a resume needs. A read one found among
 * them (a crash between marking and moving it, an older version's inbox) is moved into `read/` and left out.
 */
export async function readUnreadBounded(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<Listed<FiledMessage>> {
  const listed = await ctx.store.readUnreadInbox(teamName, agentId);
  const kept = await pruneInbox(ctx, listed.items);
  const read = kept.filter((message) => message.readAt !== undefined);
  if (read.length > 0) await ctx.store.markInboxMessages(read, {});
  return { items: kept.filter((message) => message.readAt === undefined), warnings: listed.warnings };
}

/**
 * The files of one inbox's read messages, oldest first, the newest `inboxKeepRead` of them: older ones are deleted.
 * By name alone (a file's name starts with its message's creation time): nothing is read.
 */
export async function keptReadFiles(ctx: TeamsContext, teamName: string, agentId: string): Promise<string[]> {
  const files = await ctx.store.inboxReadFiles(teamName, agentId);
  const excess = files.length - ctx.options.inboxKeepRead;
  if (excess <= 0) return files;
  await ctx.store.removeInboxMessages(files.slice(0, excess).map((file) => ({ file })));
  return files.slice(excess);
}

/**
 * After a message went into `agentId`'s inbox: prune it once its files outnumber the bound by half again. Otherwise
 * this is one directory listing, nothing read: a recipient that never reads its inbox still keeps it bounded, and a
 * pruning's reads are spread over many sends. A failure is logged: the message itself is written already.
 */
export async function keepInboxBounded(ctx: TeamsContext, teamName: string, agentId: string): Promise<void> {
  const keep = ctx.options.inboxKeepRead;
  try {
    const files = await ctx.store.inboxFiles(teamName, agentId);
    if (files.length > keep + Math.max(10, Math.ceil(keep / 2)))
      await readUnreadBounded(ctx, teamName, agentId);
  } catch (error) {
    ctx.log("warn", "pruning an inbox failed; the next message tries again", {
      team: teamName,
      agent: agentId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

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
 * `items` (one inbox, read whole) without the messages that reached their recipient beyond the newest
 * `inboxKeepRead` of them, which are deleted. A message that reached no one is always kept, however many there are.
 */
export async function pruneInbox(ctx: TeamsContext, items: FiledMessage[]): Promise<FiledMessage[]> {
  const reached = items.filter(reachedRecipient);
  if (reached.length <= ctx.options.inboxKeepRead) return items;
  const dropped = new Set(reached.sort(newestFirst).slice(ctx.options.inboxKeepRead));
  await ctx.store.removeInboxMessages([...dropped]);
  return items.filter((message) => !dropped.has(message));
}

/** One inbox, read whole and kept within the bound. */
export async function readBoundedInbox(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<Listed<FiledMessage>> {
  const listed = await ctx.store.readInbox(teamName, agentId);
  return { items: await pruneInbox(ctx, listed.items), warnings: listed.warnings };
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
      await readBoundedInbox(ctx, teamName, agentId);
  } catch (error) {
    ctx.log("warn", "pruning an inbox failed; the next message tries again", {
      team: teamName,
      agent: agentId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

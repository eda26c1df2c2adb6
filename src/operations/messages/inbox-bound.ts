import type { FiledMessage } from "../../state/inbox-files.ts";
import type { Listed } from "../../state/listed.ts";
import type { InboxMessage } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";

/** It reached its recipient: put into its session (or handed over by a resume), or returned by read-messages. */
export function reachedRecipient(message: InboxMessage): boolean {
  return message.deliveredAt !== undefined || message.readAt !== undefined;
}

/**
 * One inbox's pending messages (that reached no one yet), read whole: what a flush or a resume's hand-over needs. One
 * that reached its recipient and was left among them (a crash between its mark and its move, an inbox an older
 * version kept in one place) is moved where it belongs and left out.
 */
export async function readPending(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<Listed<FiledMessage>> {
  const listed = await ctx.store.readInboxFiles(teamName, await ctx.store.inboxFiles(teamName, agentId));
  const reached = listed.items.filter(reachedRecipient);
  if (reached.length > 0) {
    await ctx.store.markInboxMessages(reached, {});
    await keepInboxBounded(ctx, teamName, agentId);
  }
  return { items: listed.items.filter((message) => !reachedRecipient(message)), warnings: listed.warnings };
}

/**
 * The files of one inbox's delivered (not read) or read messages, oldest first, the newest `inboxKeepRead` of them:
 * older ones are deleted. By name alone (a file's name starts with its message's creation time): nothing is read.
 * A message that reached no one is never in these places, so the bound never drops one.
 */
export async function keptFiles(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
  area: "delivered" | "read",
): Promise<string[]> {
  const files = await ctx.store.inboxFilesIn(teamName, agentId, area);
  const excess = files.length - ctx.options.inboxKeepRead;
  if (excess <= 0) return files;
  await ctx.store.removeInboxMessages(files.slice(0, excess).map((file) => ({ file })));
  return files.slice(excess);
}

/**
 * After a message went into `agentId`'s inbox, or one of its messages moved: keep its delivered and read messages
 * within the bound (two directory listings, nothing read). A recipient that never reads its inbox stays bounded too.
 * A failure is logged: the message itself is written already.
 */
export async function keepInboxBounded(ctx: TeamsContext, teamName: string, agentId: string): Promise<void> {
  try {
    await keptFiles(ctx, teamName, agentId, "delivered");
    await keptFiles(ctx, teamName, agentId, "read");
  } catch (error) {
    ctx.log("warn", "pruning an inbox failed; the next message tries again", {
      team: teamName,
      agent: agentId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

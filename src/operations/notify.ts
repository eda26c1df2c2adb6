import path from "node:path";
import { isoNow } from "../clock.ts";
import type { OpencodeApi } from "../edges/opencode-api.ts";
import { withFileLock } from "../state/lock.ts";
import type { InboxMessage, TeamConfig } from "../state/schemas.ts";
import { listDir } from "../state/store.ts";
import type { TeamsContext } from "./context.ts";

/** `gone`: the message file vanished or was damaged; `undeliverable`: no reachable server holds the leader's session. */
export type DeliveryOutcome = "delivered" | "already" | "gone" | "undeliverable" | "failed";

/** Sender of notices the plugin itself writes (as opposed to an agent). */
export const SYSTEM_SENDER = "opencode-teams";

/**
 * The server that holds `sessionId`. The leader's session lives in whichever OpenCode process the leader runs, which is
 * usually this process's own server; the project server is the fallback (it shares the project's session storage).
 */
async function serverWithSession(ctx: TeamsContext, sessionId: string): Promise<OpencodeApi | undefined> {
  const candidates: (OpencodeApi | undefined)[] = [ctx.edges.localServer];
  const project = await ctx.edges.projectServer().catch(() => undefined);
  if (project && project.baseUrl !== ctx.edges.localServer.baseUrl) candidates.push(project);
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      if (await candidate.sessionExists(sessionId)) return candidate;
    } catch {
      // Unreachable: try the next one; the message stays in the inbox for a later sweep.
    }
  }
  return undefined;
}

/** A damaged inbox message found with no tool call to report it to: logged here; the store notes it for the next listing. */
function logDamage(ctx: TeamsContext, team: TeamConfig, warning: string): void {
  ctx.log("warn", "a damaged inbox message was moved aside", { team: team.name, warning });
}

/**
 * Put an inbox message into the leader's OpenCode session as a message that starts no turn (`noReply`), so the
 * leader's model reads it on its next turn. The message file's lock and a re-read under it make sure that of two
 * processes retrying the same message only one delivers it.
 */
export async function deliverToLeader(
  ctx: TeamsContext,
  team: TeamConfig,
  message: InboxMessage,
): Promise<DeliveryOutcome> {
  const file = ctx.store.inboxMessageFile(message);
  try {
    return await withFileLock(
      file,
      async () => {
        const current = await ctx.store.readInboxMessage(team.name, file);
        if (current.kind === "corrupt") logDamage(ctx, team, current.warning);
        if (current.kind !== "ok") return "gone";
        if (current.value.deliveredAt) return "already";
        const server = await serverWithSession(ctx, team.leaderSessionId);
        if (!server) return "undeliverable";
        await server.promptAsync(team.leaderSessionId, current.value.text, { noReply: true });
        await ctx.store.markInboxDelivered(current.value, isoNow(ctx.clock));
        return "delivered";
      },
      ctx.store.lockTiming,
    );
  } catch (error) {
    ctx.log("warn", "delivering a notice to the leader failed; a later sweep retries it", {
      team: team.name,
      message: message.id,
      error: error instanceof Error ? error.message : String(error),
    });
    return "failed";
  }
}

/** Append a notice to the leader's inbox and try to deliver it at once. */
export async function notifyLeader(
  ctx: TeamsContext,
  team: TeamConfig,
  notice: Pick<InboxMessage, "type" | "text"> & { data?: Record<string, unknown> },
): Promise<{ message: InboxMessage; delivery: DeliveryOutcome }> {
  const message = await ctx.store.appendInbox({
    teamName: team.name,
    to: team.leader,
    from: SYSTEM_SENDER,
    type: notice.type,
    text: notice.text,
    createdAt: isoNow(ctx.clock),
    ...(notice.data ? { data: notice.data } : {}),
  });
  return { message, delivery: await deliverToLeader(ctx, team, message) };
}

/**
 * Retry the leader's undelivered notices. `settled` remembers file names already delivered, so a long-lived inbox is
 * not re-parsed on every sweep.
 */
export async function deliverPending(
  ctx: TeamsContext,
  team: TeamConfig,
  settled: Set<string>,
): Promise<number> {
  const dir = ctx.store.paths.inboxDir(team.name, team.leader);
  let delivered = 0;
  for (const name of (await listDir(dir)).filter((file) => file.endsWith(".json")).sort()) {
    const file = path.join(dir, name);
    if (settled.has(file)) continue;
    const read = await ctx.store.readInboxMessage(team.name, file);
    if (read.kind === "corrupt") logDamage(ctx, team, read.warning);
    if (read.kind !== "ok") continue;
    if (read.value.deliveredAt) {
      settled.add(file);
      continue;
    }
    const outcome = await deliverToLeader(ctx, team, read.value);
    if (outcome === "delivered") delivered++;
    if (outcome === "delivered" || outcome === "already" || outcome === "gone") settled.add(file);
    // The leader's session is not reachable from here; the rest would fail the same way.
    if (outcome === "undeliverable") break;
  }
  return delivered;
}

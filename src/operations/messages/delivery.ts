import { isoNow } from "../../clock.ts";
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { FiledMessage } from "../../state/inbox-files.ts";
import type { InboxMessage, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { inlineText, quoteLines } from "./quoting.ts";

/**
 * How a message reached its recipient: `prompted` started a turn of an idle session; `queued` was put into the session
 * without interrupting it (busy, or `wake: false`) and reaches the model on its next turn; `stored` stays in the
 * inbox (the recipient is not running, or its server could not be reached) until a resume or a later sweep hands it
 * over.
 */
export type Delivery = "prompted" | "queued" | "stored";

/**
 * `already`: someone else delivered it first (or the session shows it); `read`: its recipient read it with
 * read-messages, so it is never put into the session; `gone`: the file vanished or was damaged.
 */
export type DeliveryOutcome = {
  delivery: Delivery;
  outcome: "delivered" | "already" | "read" | "gone" | "stored";
};

/** Where a recipient's OpenCode session is. */
interface Target {
  server: OpencodeApi;
  sessionId: string;
  /** The session's directory: the server lists a session's status only under its own directory. */
  directory?: string;
}

/**
 * The server that holds `sessionId`. The leader's session lives in whichever OpenCode process the leader runs, which is
 * usually this process's own server; the project server is the fallback (it shares the project's session storage).
 */
export async function serverWithSession(
  ctx: TeamsContext,
  sessionId: string,
): Promise<OpencodeApi | undefined> {
  const candidates: OpencodeApi[] = [ctx.edges.localServer];
  const project = await ctx.edges.projectServer().catch(() => undefined);
  if (project && project.baseUrl !== ctx.edges.localServer.baseUrl) candidates.push(project);
  for (const candidate of candidates) {
    try {
      if (await candidate.sessionExists(sessionId)) return candidate;
    } catch {
      // Unreachable: try the next one; the message stays in the inbox for a later sweep.
    }
  }
  return undefined;
}

/** The recipient's session when it can take a message now: the leader's, or a running agent's on the project server. */
async function targetOf(ctx: TeamsContext, team: TeamConfig, agentId: string): Promise<Target | undefined> {
  if (agentId === team.leader) {
    const server = await serverWithSession(ctx, team.leaderSessionId);
    return server ? { server, sessionId: team.leaderSessionId } : undefined;
  }
  const agent = await ctx.store.readAgent(team.name, agentId);
  // Not while spawning: the task prompt must be the first thing the session gets (spawn checks that it landed).
  if (agent.kind !== "ok" || (agent.value.status !== "active" && agent.value.status !== "idle"))
    return undefined;
  const server = await ctx.edges.projectServer().catch(() => undefined);
  return server ? { server, sessionId: agent.value.sessionId, directory: agent.value.cwd } : undefined;
}

/** The first line the recipient's model reads: who sent it, from where, and the id to refer to it by. */
export function messageHeader(message: InboxMessage): string {
  // A name never breaks the header's line (names are checked at spawn; this holds for any file on disk too).
  const who = inlineText(message.fromName ?? message.from);
  const role = message.fromRole ? ` (${inlineText(message.fromRole)})` : "";
  return `[message from ${who}${role} via team ${message.teamName}, id ${message.id}]`;
}

/** The header, then the sender's text quoted line by line: no line of it can pass for a header (see quoting.ts). */
export function renderMessage(message: InboxMessage): string {
  return `${messageHeader(message)}\n${quoteLines(message.text)}`;
}

/** Whether the session already holds a user message with `header` in it (a delivery whose marking was lost). */
export async function sessionShows(target: Target, header: string): Promise<boolean> {
  const texts = await target.server.userMessageTexts(target.sessionId);
  // Anywhere in the text: a resume prompt hands stored messages over after its continuation.
  return texts.some((text) => text.includes(header));
}

/**
 * Put one inbox message into its recipient's session, exactly once. The recipient is the message's addressee, or the
 * live run that resumes it (a message stored for an earlier run goes to the session of the run that took over). Under the message file's lock, re-read it (another
 * process may have delivered it). An earlier attempt (`attemptedAt`, written just before every send) may have reached
 * the session and died before marking it, or lost the server's answer: then the session is searched for the message's
 * header before sending again, so the model never sees it twice. A message its recipient read with read-messages is
 * never sent (read-messages marks it under the same lock). Errors propagate: the message stays undelivered for a
 * later sweep.
 */
export async function deliverInboxMessage(
  ctx: TeamsContext,
  team: TeamConfig,
  message: FiledMessage,
  recipient: string = message.to,
): Promise<DeliveryOutcome> {
  return ctx.store.withInboxMessageLock(message, async () => {
    const read = await ctx.store.readInboxMessage(team.name, message.file);
    if (read.kind !== "ok") return { delivery: "stored", outcome: "gone" };
    const current = { ...read.value, file: message.file };
    if (current.deliveredAt) return { delivery: "queued", outcome: "already" };
    // read-messages marks under this same lock: a message it returned has reached the model, once is enough.
    if (current.readAt) return { delivery: "stored", outcome: "read" };
    const target = await targetOf(ctx, team, recipient);
    if (!target) return { delivery: "stored", outcome: "stored" };
    const { statuses } = await target.server.sessionStatuses(
      target.directory ? [target.directory] : undefined,
    );
    const busy = statuses[target.sessionId] !== undefined;
    if (current.attemptedAt && (await sessionShows(target, messageHeader(current)))) {
      await ctx.store.markInboxDelivered(current, isoNow(ctx.clock));
      return { delivery: "queued", outcome: "already" };
    }
    const attempted = await ctx.store.markInboxAttempted(current, isoNow(ctx.clock));
    // Sent as a prompt even when busy: the turn in flight finishes undisturbed and the session's next model request
    // carries the message (see specs/send-message.md); a turn ending just then still answers it.
    const noReply = current.wake === false;
    await target.server.promptAsync(target.sessionId, renderMessage(current), { noReply });
    await ctx.store.markInboxDelivered(attempted, isoNow(ctx.clock));
    return { delivery: busy || noReply ? "queued" : "prompted", outcome: "delivered" };
  });
}

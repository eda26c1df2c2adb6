import type { AgentState, WaitingFor } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { notifyLeader } from "../messages/notify.ts";
import { inlineText } from "../messages/quoting.ts";
import { CallerError } from "../result.ts";
import { isRunning } from "./heartbeat.ts";

/** A request as an event announces it; `since` and `remindedAt` are the monitor's and the sweep's. */
export type WaitingRequest = Omit<WaitingFor, "since" | "remindedAt">;

/** How status and listings show a pending request: the same keys every time, null where the server said nothing. */
export interface WaitingView {
  kind: WaitingFor["kind"];
  requestId: string;
  title: string;
  pattern: string | null;
  since: string;
}

/** The request a running agent waits on; an agent that stopped running waits on nothing. */
export function waitingView(state: AgentState): WaitingView | null {
  const waiting = state.waitingFor;
  if (!waiting || !isRunning(state.status)) return null;
  return {
    kind: waiting.kind,
    requestId: waiting.requestId,
    title: waiting.title,
    pattern: waiting.pattern ?? null,
    since: waiting.since,
  };
}

export type PermissionResponse = "once" | "always" | "reject";

/** A pattern or a question as long as a reader takes in at a glance; the rest is counted, not shown. */
const READABLE_CHARS = 160;

/** `text` cut to a readable length, saying how much was left out. */
function readable(text: string, max = READABLE_CHARS): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

/**
 * What an "always" answer would allow from then on: OpenCode's `always` patterns of the request, often wider than
 * the request itself (`*`, every edit, for an edit of one file; `rm *` for `rm -rf build`).
 */
function alwaysScope(request: WaitingRequest): string {
  return request.always ? ` ["always" allows: ${readable(request.always)}]` : "";
}

/** One request on one line, as refusals and the CLI show it: `permission per_1: bash (git push) ["always" allows: git push *]`. */
export function requestLine(request: WaitingRequest): string {
  const pattern = request.pattern ? ` (${readable(request.pattern)})` : "";
  return `${request.kind} ${request.requestId}: ${readable(request.title)}${pattern}${alwaysScope(request)}`;
}

/** What the agent waits for, as the end of a sentence (a question keeps its own question mark). */
function described(waiting: WaitingRequest): string {
  // Title and pattern are the agent's words: kept on the notice's line, so they can never start a line of their own.
  const title = inlineText(waiting.title);
  if (waiting.kind === "question") {
    const question = `an answer to its question: ${title}`;
    return /[.?!]$/.test(question) ? question : `${question}.`;
  }
  return `permission: ${title}${waiting.pattern ? ` (${inlineText(waiting.pattern)})` : ""}${alwaysScope(waiting)}.`;
}

/** How to answer: the tool, naming the request by id (an answer goes only to the request named), or the pane. */
function howToAnswer(agent: AgentState, waiting: WaitingRequest): string {
  const answer = waiting.questions
    ? `<the answers, one line per question (${waiting.questions})>`
    : "<the answer>";
  const message = waiting.kind === "question" ? `, message: ${answer}` : "";
  const tool = `answer-permission (requestId "${waiting.requestId}"${message})`;
  // A headless agent has no pane to answer in.
  return agent.headless ? `Answer with ${tool}.` : `Answer with ${tool}, or in its pane.`;
}

/** Who asked, when not the agent's own session: a subagent its task tool started (child-sessions.ts). */
function askedBy(waiting: WaitingRequest): string {
  return waiting.sessionId ? ", on behalf of a subagent it started," : "";
}

/** Every notice about a waiting agent is worded here, so the leader reads one form. */
export function waitingNotice(agent: AgentState, waiting: WaitingRequest): string {
  return `Agent ${agent.name} (${agent.agentId}) is waiting${askedBy(waiting)} for ${described(waiting)} ${howToAnswer(agent, waiting)}`;
}

export function reminderNotice(agent: AgentState, waiting: WaitingFor, now: number): string {
  const minutes = Math.max(1, Math.round((now - Date.parse(waiting.since)) / 60_000));
  return `Reminder: agent ${agent.name} (${agent.agentId}) has been waiting ${minutes} min${askedBy(waiting)} for ${described(waiting)} ${howToAnswer(agent, waiting)}`;
}

export function rejectedNotice(agent: AgentState, waiting: WaitingRequest): string {
  return `Agent ${agent.name} (${agent.agentId}) asked for ${described(waiting)} It runs headless and headlessPermissions is "reject", so the request was rejected.`;
}

/** Tell the leader about a waiting agent; a failure is logged (the inbox keeps the notice for the sweep's retry). */
export async function tellLeaderWaiting(
  ctx: TeamsContext,
  teamName: string,
  agent: AgentState,
  text: string,
): Promise<void> {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind !== "ok") return;
  await notifyLeader(ctx, team.value, {
    type: "notice",
    text,
    data: { agentId: agent.agentId, waitingFor: agent.waitingFor ?? null },
  }).catch((error: unknown) => {
    ctx.log("warn", "could not tell the leader that an agent waits", {
      team: teamName,
      agent: agent.agentId,
      error: error instanceof Error ? error.message : String(error),
    });
  });
}

export const NO_SERVER =
  "The project's OpenCode server is not running: answer in the agent's pane, or start the server and try again.";

/** Send `response` to the server for the agent's pending request. */
export async function sendAnswer(
  ctx: TeamsContext,
  agent: AgentState,
  waiting: WaitingRequest,
  response: PermissionResponse,
  message?: string,
): Promise<void> {
  const server = await ctx.edges.projectServer();
  if (!server) throw new CallerError(NO_SERVER);
  if (message !== undefined && (waiting.kind === "permission") === (response !== "reject")) {
    throw new CallerError(
      waiting.kind === "permission"
        ? `Nothing was answered: allowing a permission carries no message to the agent. Allow it without one (and send the words with a message to the agent), or refuse it with the message as the reason.`
        : `Nothing was answered: refusing a question carries no message to the agent. Refuse it without one, or answer the question with the message.`,
    );
  }
  if (waiting.kind === "permission") {
    await server.answerPermission(
      { sessionId: waiting.sessionId ?? agent.sessionId, requestId: waiting.requestId, directory: agent.cwd },
      response,
      message,
    );
    return;
  }
  if (response !== "reject" && !message) {
    throw new CallerError(
      `Agent '${agent.agentId}' asked a question (${readable(waiting.title)}): pass the answer as message, or response "reject".`,
    );
  }
  await server.answerQuestion(
    { sessionId: waiting.sessionId ?? agent.sessionId, requestId: waiting.requestId, directory: agent.cwd },
    response === "reject" || message === undefined ? undefined : answersFor(message, waiting.questions ?? 1),
  );
}

/**
 * One answer per question: the message's lines when it has one per question, else the whole message for each
 * (OpenCode shows a question left without an answer to the agent as "Unanswered").
 */
function answersFor(message: string, questions: number): string[] {
  const lines = message
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  return questions > 1 && lines.length === questions ? lines : Array(questions).fill(message);
}

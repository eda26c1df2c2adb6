import { isoNow } from "../../clock.ts";
import type { AgentState, TeamConfig, WaitingFor } from "../../state/schemas.ts";
import { readAgentOrFail } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { notifyLeader } from "../messages/notify.ts";
import { CallerError, failureFromError, type OpResult } from "../result.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
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

/** What the agent waits for, as the end of a sentence (a question keeps its own question mark). */
function described(waiting: WaitingRequest): string {
  if (waiting.kind === "question") {
    const question = `an answer to its question: ${waiting.title}`;
    return /[.?!]$/.test(question) ? question : `${question}.`;
  }
  return `permission: ${waiting.title}${waiting.pattern ? ` (${waiting.pattern})` : ""}.`;
}

/** Every notice about a waiting agent is worded here, so the leader reads one form. */
export function waitingNotice(agent: AgentState, waiting: WaitingRequest): string {
  const tool =
    waiting.kind === "question" ? "answer-permission (message is the answer)" : "answer-permission";
  // A headless agent has no pane to answer in.
  const how = agent.headless ? `Answer with ${tool}.` : `Answer with ${tool}, or in its pane.`;
  return `Agent ${agent.name} (${agent.agentId}) is waiting for ${described(waiting)} ${how}`;
}

export function reminderNotice(agent: AgentState, waiting: WaitingFor, now: number): string {
  const minutes = Math.max(1, Math.round((now - Date.parse(waiting.since)) / 60_000));
  return `Reminder: agent ${agent.name} (${agent.agentId}) has been waiting ${minutes} min for ${described(waiting)} Answer with answer-permission, or in its pane.`;
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

/** Tell the leader once per request (the caller saw it first, under the agent's lock), or reject it when told to. */
export async function announceWaiting(
  ctx: TeamsContext,
  teamName: string,
  agent: AgentState,
  request: WaitingRequest,
): Promise<void> {
  if (agent.headless && ctx.options.headlessPermissions === "reject") {
    try {
      await sendAnswer(ctx, agent, request, "reject");
      await tellLeaderWaiting(ctx, teamName, agent, rejectedNotice(agent, request));
      return;
    } catch (error) {
      ctx.log("warn", "could not reject a headless agent's request; the leader is asked instead", {
        agent: agent.agentId,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
  await tellLeaderWaiting(ctx, teamName, agent, waitingNotice(agent, request));
}

/** Send `response` to the server for the agent's pending request. */
export async function sendAnswer(
  ctx: TeamsContext,
  agent: AgentState,
  waiting: WaitingRequest,
  response: PermissionResponse,
  message?: string,
): Promise<void> {
  const server = await ctx.edges.projectServer();
  if (!server)
    throw new CallerError(
      "The project's OpenCode server is not running: answer in the agent's pane, or start the server and try again.",
    );
  if (waiting.kind === "permission") {
    await server.answerPermission(
      { sessionId: agent.sessionId, requestId: waiting.requestId, directory: agent.cwd },
      response,
    );
    return;
  }
  if (response !== "reject" && !message) {
    throw new CallerError(
      `Agent '${agent.agentId}' asked a question (${waiting.title}): pass the answer as message, or response "reject".`,
    );
  }
  await server.answerQuestion(
    { sessionId: agent.sessionId, requestId: waiting.requestId, directory: agent.cwd },
    response === "reject" ? undefined : message,
  );
}

export interface AnswerPermissionInput {
  teamName: string;
  agentId: string;
  response: PermissionResponse;
  message?: string;
}

export type AnswerPermissionResult = OpResult<{
  agentId: string;
  requestId: string;
  kind: WaitingFor["kind"];
  response: PermissionResponse;
}>;

async function answerFor(
  ctx: TeamsContext,
  team: TeamConfig,
  input: AnswerPermissionInput,
): Promise<AnswerPermissionResult> {
  const agent = await readAgentOrFail(ctx, team, input.agentId);
  const waiting = agent.waitingFor;
  if (!waiting) {
    throw new CallerError(
      `Agent '${agent.agentId}' has no pending permission request or question (get-agent-status shows waitingFor). Nothing was answered.`,
    );
  }
  await sendAnswer(ctx, agent, waiting, input.response, input.message);
  ctx.log("info", "answered an agent's pending request", {
    team: team.name,
    agent: agent.agentId,
    request: waiting.requestId,
    response: input.response,
    at: isoNow(ctx.clock),
  });
  // waitingFor clears when the server's reply event arrives, as it does when the human answers in the pane.
  return {
    success: true,
    agentId: agent.agentId,
    requestId: waiting.requestId,
    kind: waiting.kind,
    response: input.response,
  };
}

/** answer-permission (leader only): see specs/answer-permission.md. */
export async function answerPermission(
  ctx: TeamsContext,
  input: AnswerPermissionInput,
  callerSessionId: string,
): Promise<AnswerPermissionResult> {
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(
    ctx,
    team,
    callerSessionId,
    `Only the leader of team '${team.name}' can answer its agents' requests; ask the leader.`,
  );
  return answerFor(ctx, team, input);
}

/**
 * The CLI's approve/deny: the human at the terminal needs no leader session, and may name the agent as the status
 * table shows it (the name of a running agent) instead of its id.
 */
export async function answerPermissionAsHuman(
  ctx: TeamsContext,
  input: AnswerPermissionInput,
): Promise<AnswerPermissionResult> {
  try {
    const team = await loadTeam(ctx, input.teamName);
    const { items } = await ctx.store.listAgentViews(team.name);
    const named = items.find(({ state }) => state.name === input.agentId && isRunning(state.status));
    return await answerFor(ctx, team, { ...input, agentId: named?.state.agentId ?? input.agentId });
  } catch (error) {
    return failureFromError(error, "answering the agent's request");
  }
}

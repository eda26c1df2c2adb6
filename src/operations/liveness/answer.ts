import { isoNow } from "../../clock.ts";
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { AgentState, TeamConfig, WaitingFor } from "../../state/schemas.ts";
import { agentLabel } from "../agents/agent-words.ts";
import { readAgentOrFail } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, errorText, failureFromError, type OpResult } from "../result.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
import { descendsFrom } from "./child-sessions.ts";
import { isRunning } from "./heartbeat.ts";
import { pendingSignal } from "./signals.ts";
import {
  NO_SERVER,
  type PermissionResponse,
  rejectedNotice,
  requestLine,
  sendAnswer,
  tellLeaderWaiting,
  type WaitingRequest,
  waitingNotice,
} from "./waiting.ts";

// An answer goes only to the request its caller was shown: named by id, checked against the server's own pending list
// at answer time (a request answered in the pane and followed by another must never receive an answer meant for the
// first), and never sent for an agent that has ended.

export interface AnswerPermissionInput {
  teamName: string;
  agentId: string;
  /** The request the caller was shown (waitingFor.requestId, the leader's notice). */
  requestId: string;
  response: PermissionResponse;
  message?: string;
}

export type AnswerPermissionResult = OpResult<{
  agentId: string;
  requestId: string;
  kind: WaitingFor["kind"];
  response: PermissionResponse;
}>;

/** How many pending requests a refusal names; a session rarely has more than one. */
const LISTED_PENDING = 3;

function endedError(agent: AgentState): CallerError {
  return new CallerError(
    `${agentLabel(agent)} has ended (${agent.status}): its requests ended with its turn. Nothing was answered.`,
  );
}

/** What the server holds open: the agent's session's requests, oldest first, and the ids pending for other sessions. */
interface ServerPending {
  pending: WaitingRequest[];
  elsewhere: Set<string>;
}

async function serverPending(ctx: TeamsContext, agent: AgentState): Promise<ServerPending> {
  const server = await ctx.edges.projectServer();
  if (!server) throw new CallerError(NO_SERVER);
  const listed = await server.pendingRequests([agent.cwd]).catch((error: unknown) => {
    throw new CallerError(
      `Could not ask the project's OpenCode server which requests are pending (${errorText(error)}). Nothing was answered: try again, or answer in the agent's pane.`,
    );
  });
  const requests: WaitingRequest[] = [];
  const elsewhere = new Set<string>();
  for (const item of listed) {
    const signal = pendingSignal(item);
    if (signal?.kind !== "waiting") continue;
    if (signal.sessionId === agent.sessionId) requests.push(signal.request);
    else if (await startedBy(server, signal.sessionId, agent))
      requests.push({ ...signal.request, sessionId: signal.sessionId });
    else elsewhere.add(signal.request.requestId);
  }
  return { pending: requests, elsewhere };
}

/** A subagent's session the agent started (its task tool): its requests are the agent's. */
async function startedBy(server: OpencodeApi, sessionId: string, agent: AgentState): Promise<boolean> {
  return descendsFrom(server, sessionId, agent.sessionId).catch((error: unknown) => {
    throw new CallerError(
      `Could not ask the project's OpenCode server which session asked a pending request (${errorText(error)}). Nothing was answered: try again, or answer in the agent's pane.`,
    );
  });
}

/** What is pending now, for a refusal: each request by id, kind, title and pattern (cut), and how to answer it. */
export function pendingNowText(pending: readonly WaitingRequest[]): string {
  if (pending.length === 0) return "Nothing is pending for it now.";
  const shown = pending.slice(0, LISTED_PENDING).map(requestLine);
  const more = pending.length > LISTED_PENDING ? ` (and ${pending.length - LISTED_PENDING} more)` : "";
  return `Pending now: ${shown.join("; ")}${more}. To answer one, look at it and pass its requestId.`;
}

function notPendingError(agent: AgentState, requestId: string, found: ServerPending): CallerError {
  const named = `Request '${requestId.slice(0, 100)}'`;
  const why = found.elsewhere.has(requestId)
    ? `${named} is pending for a session that is neither ${agentLabel(agent)}'s nor one of its subagents' (another agent's, or the user's): it cannot be answered through this agent.`
    : `${named} of ${agentLabel(agent)} is no longer pending (answered, perhaps in its pane, or replaced by another).`;
  return new CallerError(`${why} Nothing was answered. ${pendingNowText(found.pending)}`);
}

/**
 * OpenCode answers "always" for the request named and, with it, every other pending permission request of the
 * session its `always` patterns cover: those would be answered unseen. So "always" waits until the named request is
 * the agent's only pending permission request.
 */
function refuseWiderAlways(
  agent: AgentState,
  request: WaitingRequest,
  pending: readonly WaitingRequest[],
): void {
  const others = pending.filter((item) => item.kind === "permission" && item.requestId !== request.requestId);
  if (request.kind !== "permission" || others.length === 0) return;
  throw new CallerError(
    `An "always" answer to '${request.requestId}' of ${agentLabel(agent)} would also answer, unseen, its other pending requests that the new rule covers (OpenCode answers them with it). Nothing was answered. ${pendingNowText(pending)} Answer them one by one ("once" or "reject"), then "always" if you still mean it.`,
  );
}

/** The agent's pending requests as the server lists them now: what the CLI shows before it answers. */
export async function pendingRequestsOf(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
): Promise<{ agent: AgentState } & ServerPending> {
  const agent = await readAgentOrFail(ctx, team, agentId);
  if (!isRunning(agent.status)) throw endedError(agent);
  return { agent, ...(await serverPending(ctx, agent)) };
}

/**
 * Check and answer under the agent's lock: an agent is ended under that lock (finish, inactive), so none ends between
 * the check and the answer, and no answer reaches a session whose agent has ended.
 */
async function answerFor(
  ctx: TeamsContext,
  team: TeamConfig,
  input: AnswerPermissionInput,
): Promise<AnswerPermissionResult> {
  const { agent, request } = await ctx.store.withAgentLock(team.name, input.agentId, async () => {
    const { agent, ...found } = await pendingRequestsOf(ctx, team, input.agentId);
    const { pending } = found;
    const request = pending.find((item) => item.requestId === input.requestId);
    if (!request) throw notPendingError(agent, input.requestId, found);
    if (input.response === "always") refuseWiderAlways(agent, request, pending);
    await sendAnswer(ctx, agent, request, input.response, input.message);
    return { agent, request };
  });
  ctx.log("info", "answered an agent's pending request", {
    team: team.name,
    agent: agent.agentId,
    request: request.requestId,
    response: input.response,
    at: isoNow(ctx.clock),
  });
  // waitingFor clears when the server's reply event arrives, as it does when the human answers in the pane.
  return {
    success: true,
    agentId: agent.agentId,
    requestId: request.requestId,
    kind: request.kind,
    response: input.response,
  };
}

/**
 * headlessPermissions "reject": the monitor refuses a headless agent's request, under the agent's lock and only while
 * the agent runs (it may have ended since the request was seen). Returns whether the reject was sent.
 */
export async function rejectWhileRunning(
  ctx: TeamsContext,
  agent: AgentState,
  request: WaitingRequest,
): Promise<boolean> {
  return ctx.store.withAgentLock(agent.teamName, agent.agentId, async () => {
    const read = await ctx.store.readAgent(agent.teamName, agent.agentId);
    if (read.kind !== "ok" || !isRunning(read.value.status)) return false;
    await sendAnswer(ctx, read.value, request, "reject");
    return true;
  });
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

/** The CLI's approve/deny, for the human at the terminal (no leader session): the request it showed, by id. */
export async function answerPermissionAsHuman(
  ctx: TeamsContext,
  input: AnswerPermissionInput,
): Promise<AnswerPermissionResult> {
  try {
    return await answerFor(ctx, await loadTeam(ctx, input.teamName), input);
  } catch (error) {
    return failureFromError(error, "answering the agent's request");
  }
}

/**
 * Tell the leader once per request (the caller saw it first, under the agent's lock), or reject it when headless
 * agents' requests are rejected: only while the agent runs, else the leader is asked instead.
 */
export async function announceWaiting(
  ctx: TeamsContext,
  teamName: string,
  agent: AgentState,
  request: WaitingRequest,
): Promise<void> {
  if (agent.headless && ctx.options.headlessPermissions === "reject") {
    try {
      if (!(await rejectWhileRunning(ctx, agent, request))) return;
      await tellLeaderWaiting(ctx, teamName, agent, rejectedNotice(agent, request));
      return;
    } catch (error) {
      ctx.log("warn", "could not reject a headless agent's request; the leader is asked instead", {
        agent: agent.agentId,
        error: errorText(error),
      });
    }
  }
  await tellLeaderWaiting(ctx, teamName, agent, waitingNotice(agent, request));
}

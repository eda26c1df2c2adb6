import type { TeamsContext } from "../operations/context.ts";
import {
  type AnswerPermissionResult,
  answerPermissionAsHuman,
  pendingNowText,
  pendingRequestsOf,
} from "../operations/liveness/answer.ts";
import { isRunning } from "../operations/liveness/heartbeat.ts";
import { type PermissionResponse, requestLine, type WaitingRequest } from "../operations/liveness/waiting.ts";
import { failureFromError } from "../operations/result.ts";
import { loadTeam } from "../operations/team/identity.ts";

export const ANSWER_USAGE = `  opencode-teams approve <team> <agent> [--request <id>] [--always] [--message <text>]
                                                   allow the request it waits on (shown, then answered by id)
  opencode-teams deny <team> <agent> [--request <id>]    refuse it`;

/** Asks the human at the terminal a yes/no question; absent when there is no terminal to ask on. */
export type Confirm = (question: string) => Promise<boolean>;

interface AnswerFlags {
  always: boolean;
  message?: string;
  request?: string;
}

/** The request to answer: the one `--request` names, else the only one pending; a refusal text otherwise. */
function chosen(
  { pending, elsewhere }: { pending: readonly WaitingRequest[]; elsewhere: ReadonlySet<string> },
  named: string | undefined,
): WaitingRequest | string {
  if (named !== undefined) {
    const why = elsewhere.has(named)
      ? "is pending for a session that is neither the agent's nor one of its subagents' (another agent's, or the user's)"
      : "is not pending (answered, perhaps in the pane, or replaced)";
    return (
      pending.find((request) => request.requestId === named) ??
      `request '${named.slice(0, 100)}' ${why}. Nothing was answered. ${pendingNowText(pending)}`
    );
  }
  const [only] = pending;
  if (only && pending.length === 1) return only;
  if (!only) return "it waits on no permission request or question. Nothing was answered.";
  return `it waits on ${pending.length} requests; name one with --request <id>. Nothing was answered. ${pendingNowText(pending)}`;
}

/** Whether the human answers the request shown: named by --request, else confirmed at the terminal. */
async function confirmed(
  request: WaitingRequest,
  response: PermissionResponse,
  named: boolean,
  confirm: Confirm | undefined,
): Promise<string | undefined> {
  if (named) return undefined;
  if (!confirm)
    return `not answered: with no terminal to confirm on, name the request shown: --request ${request.requestId}`;
  const verb = response === "reject" ? "Refuse" : response === "always" ? "Allow always" : "Allow once";
  return (await confirm(`${verb}? [y/N] `)) ? undefined : "not answered.";
}

/**
 * Show the request that will be answered, then answer that id only: the one --request names, or the one shown and
 * confirmed at the terminal. The answer re-checks the server's pending list, so a request that changed in between
 * (answered in the pane, replaced) is refused rather than answered unseen.
 */
async function answerShown(
  ctx: TeamsContext,
  input: { teamName: string; agent: string; response: PermissionResponse; flags: AnswerFlags },
  io: { print: (text: string) => void; confirm: Confirm | undefined },
): Promise<AnswerPermissionResult> {
  try {
    const team = await loadTeam(ctx, input.teamName);
    const { items } = await ctx.store.listAgentViews(team.name);
    // The status table shows a running agent by name: that name may stand for its id. An id is never read as a
    // name, since a name may be any text, another agent's id included.
    const byId = items.some(({ state }) => state.agentId === input.agent);
    const named = byId
      ? undefined
      : items.find(({ state }) => state.name === input.agent && isRunning(state.status));
    const { agent, ...found } = await pendingRequestsOf(ctx, team, named?.state.agentId ?? input.agent);
    const request = chosen(found, input.flags.request);
    const who = `Agent '${agent.name}' (${agent.agentId})`;
    if (typeof request === "string") return { success: false, error: `${who}: ${request}` };
    io.print(`Request of ${agent.name} (${agent.agentId}): ${requestLine(request)}`);
    const declined = await confirmed(request, input.response, input.flags.request !== undefined, io.confirm);
    if (declined) return { success: false, error: `${who}: ${declined}` };
    return await answerPermissionAsHuman(ctx, {
      teamName: team.name,
      agentId: agent.agentId,
      requestId: request.requestId,
      response: input.response,
      ...(input.flags.message !== undefined ? { message: input.flags.message } : {}),
    });
  } catch (error) {
    return failureFromError(error, "answering the agent's request");
  }
}

/** `approve` / `deny`: the human answers an agent's pending permission request or question. Returns the exit code. */
export async function runAnswer(
  ctx: TeamsContext,
  command: "approve" | "deny",
  positionals: readonly string[],
  flags: AnswerFlags,
  print: (text: string) => void,
  confirm?: Confirm,
): Promise<number> {
  const [teamName, agent] = positionals;
  if (!teamName || !agent || flags.request === "") {
    print(`usage:\n${ANSWER_USAGE}`);
    return 2;
  }
  const response: PermissionResponse = command === "deny" ? "reject" : flags.always ? "always" : "once";
  const result = await answerShown(ctx, { teamName, agent, response, flags }, { print, confirm });
  if (!result.success) {
    print(`opencode-teams: ${result.error}`);
    return 1;
  }
  print(`Answered ${result.kind} ${result.requestId} of ${result.agentId}: ${result.response}`);
  return 0;
}

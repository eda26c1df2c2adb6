import { assertAgentId, assertTeamName } from "../../state/paths.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { notifyLeader } from "../messages/notify.ts";
import { inlineText, quoteLines } from "../messages/quoting.ts";
import { CallerError, errorText, fail, type OpResult } from "../result.ts";
import { loadTeam, resolveCaller } from "../team/identity.ts";
import { agentLabel } from "./agent-words.ts";
import { type FinishResult, finishAgent, readAgentOrFail } from "./finish.ts";

export const SUMMARY_MAX = 4_000;
/** The findings that reach the leader in the completion notice (bytes, UTF-8). */
export const REPORT_MAX_BYTES = 16 * 1024;

export interface CompleteAgentInput {
  teamName: string;
  agentId: string;
  status: "completed" | "failed";
  summary?: string;
  report?: string;
}

export interface CompleteAgentOutput {
  agentId: string;
  name: string;
  status: "completed" | "failed";
  /** in_progress tasks the agent still owned, now pending again. */
  reassignedTasks: string[];
  paneClosed: boolean;
  message: string;
  warnings?: string[];
}

/**
 * complete-agent: the agent reports the end of its work (or the leader does for it). The outcome goes to the history
 * and the leader, and the agent ends for good: terminated, tasks it still held handed back, pane closed unless the
 * team keeps panes.
 */
export async function completeAgent(
  ctx: TeamsContext,
  input: CompleteAgentInput,
  callerSessionId: string,
): Promise<OpResult<CompleteAgentOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const { summary, report } = checkedTexts(input);
  const team = await loadTeam(ctx, input.teamName);
  const agent = await readAgentOrFail(ctx, team, input.agentId);
  const caller = await resolveCaller(ctx, team, callerSessionId);
  const byItself = agent.sessionId === callerSessionId && caller?.agentId === agent.agentId;
  const ended =
    agent.status === "terminated"
      ? `${agentLabel(agent)} already ended (${agent.outcome ?? "terminated"})`
      : undefined;
  if (ended && agent.sessionId === callerSessionId && caller && !byItself) {
    // A resumed agent may still quote its old id from earlier in its conversation.
    return fail(
      `${ended}; this session now belongs to agent '${caller.agentId}' (resumed): use that agentId`,
    );
  }
  if (!byItself && !caller?.isLeader) return fail(`Agent '${input.agentId}' does not belong to this session`);
  if (agent.role === "leader") return fail("The team leader is not a spawned agent and cannot be completed");
  if (ended) return fail(ended);
  if (agent.status === "inactive") {
    return fail(
      `${agentLabel(agent)} is inactive and was recorded as interrupted; resume it with resume-agent, or kill it`,
    );
  }

  const reason = `${input.status}${byItself ? "" : " (reported by the leader)"}${summary ? `: ${summary}` : ""}`;
  const finished = await finishAgent(ctx, agent, {
    reason,
    outcome: input.status,
    history: input.status,
    ...(summary ? { summary } : {}),
    keepPane: team.keepPanes,
    abortSession: !byItself,
  });
  const warnings = [...finished.warnings];
  if (byItself) {
    await tellLeader(ctx, team, agent, { status: input.status, summary, report }, finished).catch(
      (error: unknown) => warnings.push(`The leader could not be notified: ${errorText(error)}`),
    );
  }
  ctx.log("info", `agent ${agent.name} ${input.status}`, { agentId: agent.agentId, byItself });
  return {
    success: true,
    agentId: agent.agentId,
    name: agent.name,
    status: input.status,
    reassignedTasks: finished.reassignedTasks,
    paneClosed: !team.keepPanes && agent.paneId !== undefined,
    message: byItself
      ? "Recorded. Your work is done: end your turn now without further tool calls."
      : `Agent ${agent.name} recorded as ${input.status} and stopped.`,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/** The summary and report, trimmed (blank: none) and within their limits. */
function checkedTexts(input: CompleteAgentInput): { summary?: string; report?: string } {
  const summary = input.summary?.trim() || undefined;
  if (summary && summary.length > SUMMARY_MAX) {
    throw new CallerError(`summary is ${summary.length} characters; keep it under ${SUMMARY_MAX}`);
  }
  const report = input.report?.trim() || undefined;
  const reportBytes = report ? Buffer.byteLength(report, "utf8") : 0;
  if (reportBytes > REPORT_MAX_BYTES) {
    throw new CallerError(
      `report is ${reportBytes} bytes; keep it under ${REPORT_MAX_BYTES} (put the rest in a file and name it in the report)`,
    );
  }
  return { summary, report };
}

/** The completion notice an agent's own report sends the leader. */
async function tellLeader(
  ctx: TeamsContext,
  team: TeamConfig,
  agent: AgentState,
  end: { status: CompleteAgentInput["status"]; summary?: string; report?: string },
  finished: FinishResult,
): Promise<void> {
  const { status, summary, report } = end;
  const reassigned = finished.reassignedTasks;
  await notifyLeader(ctx, team, {
    type: status === "completed" ? "agent_completed" : "agent_failed",
    // The agent's own words stay on our line (summary) or quoted (report): they never start a line of the notice.
    text: `Agent ${agent.name} (${agent.agentId}) ${status}${summary ? `: ${inlineText(summary)}` : "."}${
      reassigned.length > 0
        ? ` Tasks it still had in progress are pending again: ${reassigned.join(", ")}.`
        : ""
    }${report ? `\nReport from ${agent.name}:\n${quoteLines(report)}` : ""}${finished.worktreeKept.map((kept) => `\n${kept}.`).join("")}`,
    data: {
      agentId: agent.agentId,
      name: agent.name,
      status,
      ...(summary ? { summary } : {}),
      ...(report ? { report } : {}),
      reassignedTasks: reassigned,
    },
  });
}

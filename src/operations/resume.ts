import { assertAgentId, assertTeamName } from "../state/paths.ts";
import type { AgentState } from "../state/schemas.ts";
import type { TeamsContext } from "./context.ts";
import { loadTeam, requireLeader } from "./identity.ts";
import { handOverText, markHandedOver, storedMessages } from "./inbox.ts";
import { finishAgent, readAgentOrFail } from "./kill.ts";
import { CallerError, fail, type OpResult } from "./result.ts";
import {
  launchAgent,
  projectServerOrFail,
  recordedModel,
  type SpawnAgentOutput,
  type SpawnProgress,
  StepClock,
} from "./spawn.ts";

export const RESUME_PROMPT_MAX = 20_000;

export interface ResumeAgentInput {
  teamName: string;
  agentId: string;
  prompt?: string;
}

export type ResumeAgentOutput = SpawnAgentOutput & {
  /** The agent this one continues. */
  resumedFrom: string;
  /** true: the old session (and its conversation) goes on; false: it was gone, a new one got the original prompt. */
  sessionReused: boolean;
};

/** Outcomes of a run that was cut short, and so may be resumed. */
const RESUMABLE_OUTCOMES: ReadonlySet<string> = new Set(["interrupted", "failed", "timeout"]);

function defaultContinuation(agent: AgentState, agentId: string): string {
  return [
    `You are ${agent.name} of team ${agent.teamName}, resumed: your previous run was interrupted (${
      agent.statusReason ?? "it stopped responding"
    }).`,
    `Your agent id is now ${agentId} (it was ${agent.agentId}): use the new one in every tool call.`,
    "Continue the task you were given where you left off. Check the task board (list-tasks) first: a task you had in " +
      "progress may have gone back to pending; claim it again with update-task before you continue it.",
    "Keep calling heartbeat while you work, and call complete-agent when you are done.",
  ].join("\n");
}

/** Why `agent` cannot be resumed, or undefined when it can. */
async function refusal(ctx: TeamsContext, agent: AgentState): Promise<string | undefined> {
  const who = `Agent '${agent.name}' (${agent.agentId})`;
  if (agent.role === "leader") return "The team leader cannot be resumed";
  if (agent.status === "terminated" && !RESUMABLE_OUTCOMES.has(agent.outcome ?? "")) {
    return `${who} ended as ${agent.outcome ?? "terminated"}; only an inactive, interrupted, failed or timed-out agent can be resumed. Spawn a new agent for new work.`;
  }
  if (agent.status !== "terminated" && agent.status !== "inactive") {
    return `${who} is ${agent.status}, not interrupted; only an inactive, interrupted, failed or timed-out agent can be resumed`;
  }
  const { items } = await ctx.store.listAgentViews(agent.teamName);
  const successor = items.find((view) => view.state.resumes === agent.agentId);
  if (successor) {
    return `${who} was already resumed as ${successor.state.name} (${successor.state.agentId}); resume that one instead if it stopped too`;
  }
  return undefined;
}

/**
 * resume-agent: leader only. A new agent record continues an interrupted one: on its old session when the server
 * still has it (the conversation goes on), else on a new session that gets the original prompt again.
 */
export async function resumeAgent(
  ctx: TeamsContext,
  input: ResumeAgentInput,
  callerSessionId: string,
  report: SpawnProgress = () => {},
): Promise<OpResult<ResumeAgentOutput>> {
  const steps = new StepClock(report);
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const continuation = input.prompt?.trim() || undefined;
  if (continuation && continuation.length > RESUME_PROMPT_MAX) {
    throw new CallerError(`prompt is ${continuation.length} characters; keep it under ${RESUME_PROMPT_MAX}`);
  }
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can resume agents");
  const old = await readAgentOrFail(ctx, team, input.agentId);
  const refused = await refusal(ctx, old);
  if (refused) return fail(refused);
  if (!old.headless && !(await ctx.edges.tmux.available()))
    return fail("tmux is required for agent spawning");

  steps.progress("server", "Starting the OpenCode server");
  const server = await projectServerOrFail(ctx);
  if ("success" in server) return server;

  const warnings: string[] = [];
  if (old.status !== "terminated") {
    // Inactive: its run was already recorded as interrupted. End the record (its dead pane closed, color freed) so
    // that exactly one live record owns the session.
    steps.progress("finish", `Closing what is left of ${old.name}'s previous run`);
    const finished = await finishAgent(ctx, old, {
      reason: old.statusReason ?? "inactive; resumed",
      outcome: "interrupted",
      history: "interrupted",
    });
    warnings.push(...finished.warnings);
  }

  const sessionReused = await server.api.sessionExists(old.sessionId).catch(() => false);
  // Messages sent to it while it was stopped were kept in its inbox: the continuation hands them over.
  const stored = await storedMessages(ctx, team, old.agentId);
  const handOver = stored.length > 0 ? `\n\n${handOverText(stored)}` : "";
  const text = (agentId: string) => `${continuation ?? defaultContinuation(old, agentId)}${handOver}`;
  const launched = await launchAgent(
    ctx,
    {
      team,
      server,
      role: old.role === "reviewer" ? "reviewer" : "worker",
      name: old.name,
      model: recordedModel(old),
      cwd: old.cwd,
      headless: old.headless,
      ...(old.timeoutMinutes !== undefined ? { timeoutMinutes: old.timeoutMinutes } : {}),
      ...(old.plan !== undefined ? { plan: old.plan } : {}),
      taskPrompt: old.prompt,
      // A new session knows nothing: it gets its task again, then why it starts over.
      message: (agentId) => (sessionReused ? text(agentId) : `${old.prompt}\n\n${text(agentId)}`),
      ...(sessionReused ? { reuseSessionId: old.sessionId } : {}),
      resumes: old.agentId,
    },
    steps,
  );
  if (!launched.success) return launched;
  if (launched.promptDelivery !== "failed") await markHandedOver(ctx, stored);
  if (!sessionReused) {
    warnings.push(
      `The previous session ${old.sessionId} no longer exists on the server: a new session got the original prompt`,
    );
  }
  const { warnings: launchWarnings = [], ...rest } = launched;
  const allWarnings = [...warnings, ...launchWarnings];
  return {
    ...rest,
    resumedFrom: old.agentId,
    sessionReused,
    ...(allWarnings.length > 0 ? { warnings: allWarnings } : {}),
  };
}

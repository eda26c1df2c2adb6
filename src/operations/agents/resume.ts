import { v4 as uuidv4 } from "uuid";
import { isoNow } from "../../clock.ts";
import type { ProjectServer } from "../../edges/server-manager.ts";
import { assertAgentId, assertTeamName } from "../../state/paths.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { Budget } from "../../state/usage-schema.ts";
import type { TeamsContext } from "../context.ts";
import {
  handOverText,
  markHandedOver,
  markHandOverAttempted,
  messagesToHandOver,
} from "../messages/inbox.ts";
import { CallerError, fail, type OpResult } from "../result.ts";
import { projectServerOrFail } from "../server/prewarm.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
import { budgetInput, teamBudgetRefusal } from "../usage/limits.ts";
import { resumedBudget, usageBaseOf, withCountedUsage } from "../usage/resume-budget.ts";
import { worktreeCwd } from "../worktrees/worktrees.ts";
import { resolveCwd } from "./agent-input.ts";
import { agentLabel } from "./agent-words.ts";
import { type FinishHow, finishAgent, readAgentOrFail } from "./finish.ts";
import { launchAgent } from "./launch.ts";
import type { SpawnAgentOutput } from "./launch-spec.ts";
import { type ResolvedModel, recordedModel, resolveModel } from "./model.ts";
import { claimBy, claimHolds, withoutClaim } from "./resume-claim.ts";
import { type SpawnProgress, StepClock } from "./step-clock.ts";

export const RESUME_PROMPT_MAX = 20_000;

export interface ResumeAgentInput {
  teamName: string;
  agentId: string;
  prompt?: string;
  /** Continue on this model ("provider/model", or with providerId) instead of the one the agent had. */
  model?: string;
  providerId?: string;
  /** A new budget for the continued run; required when the agent was stopped by its budget. */
  budget?: { usd?: number; tokens?: number };
}

export type ResumeAgentOutput = SpawnAgentOutput & {
  /** The agent this one continues. */
  resumedFrom: string;
  /** true: the old session (and its conversation) goes on; false: it was gone, a new one got the original prompt. */
  sessionReused: boolean;
};

/** Outcomes of a run that was cut short, and so may be resumed. */
const RESUMABLE_OUTCOMES: ReadonlySet<string> = new Set(["interrupted", "failed", "timeout", "budget"]);

function defaultContinuation(agent: AgentState, agentId: string): string {
  return [
    `You are ${agent.name} of team ${agent.teamName}, resumed: your previous run was interrupted (${
      agent.failing
        ? `its model failed: ${agent.failing.error}`
        : (agent.statusReason ?? "it stopped responding")
    }).`,
    `Your agent id is now ${agentId} (it was ${agent.agentId}): use the new one in every tool call.`,
    "Continue the task you were given where you left off. Check the task board (list-tasks) first: a task you had in " +
      "progress may have gone back to pending; claim it again with update-task before you continue it.",
    "Keep calling heartbeat while you work, and call complete-agent when you are done.",
  ].join("\n");
}

/** Why `agent`'s status and role forbid a resume, or undefined when they allow one. */
function statusRefusal(agent: AgentState): string | undefined {
  if (agent.role === "leader") return "The team leader cannot be resumed";
  // Its model refused a turn: it is still running, but cannot work until it continues on another model.
  if (agent.failing && (agent.status === "idle" || agent.status === "active")) return undefined;
  if (agent.status === "terminated" && !RESUMABLE_OUTCOMES.has(agent.outcome ?? "")) {
    return `${agentLabel(agent)} ended as ${agent.outcome ?? "terminated"}; only an inactive, interrupted, failed or timed-out agent can be resumed. Spawn a new agent for new work.`;
  }
  if (agent.status !== "terminated" && agent.status !== "inactive") {
    return `${agentLabel(agent)} is ${agent.status}, not interrupted; only an inactive, interrupted, failed or timed-out agent, or one whose model is failing, can be resumed`;
  }
  return undefined;
}

function alreadyResumed(agent: AgentState, successor: Pick<AgentState, "name" | "agentId">): string {
  return `${agentLabel(agent)} was already resumed as ${successor.name} (${successor.agentId}); resume that one instead if it stopped too`;
}

/** Why `agent` cannot be resumed, or undefined when it can (a first look; the claim decides under the lock). */
async function refusal(ctx: TeamsContext, agent: AgentState): Promise<string | undefined> {
  const refused = statusRefusal(agent);
  if (refused) return refused;
  // Agents resumed before resumedBy existed are found by their successor's `resumes`.
  const { items } = await ctx.store.listAgentViews(agent.teamName);
  const successor = items.find((view) => view.state.resumes === agent.agentId);
  return successor ? alreadyResumed(agent, successor.state) : undefined;
}

/**
 * Claim `agent` for the successor `successorId` under the agent's lock, so that of two resume calls racing (models
 * call tools in parallel) exactly one launches. Refused while another claim holds: its successor has a record, or its
 * claimant may still be launching one (claimHolds). Returns the refusal, or undefined once the claim is written.
 */
async function claimResume(
  ctx: TeamsContext,
  agent: AgentState,
  successorId: string,
): Promise<string | undefined> {
  const { teamName, agentId } = agent;
  return ctx.store.withAgentLock(teamName, agentId, async () => {
    const read = await ctx.store.readAgent(teamName, agentId);
    if (read.kind !== "ok")
      return `${agentLabel(agent)} can no longer be read (${read.kind}); check list-agents`;
    const current = read.value;
    const refused = statusRefusal(current);
    if (refused) return refused;
    if (current.resumedBy) {
      const successor = await ctx.store.readAgent(teamName, current.resumedBy);
      if (successor.kind === "ok") return alreadyResumed(current, successor.value);
      if (successor.kind === "corrupt" || claimHolds(ctx.edges.processes, current, ctx.clock.now())) {
        return `${agentLabel(current)} is being resumed right now as agent ${current.resumedBy} by another resume-agent call; wait for it, then check list-agents for that agent`;
      }
      ctx.log("warn", `resume of ${agentId} as ${current.resumedBy} never launched; claiming it again`);
    }
    const now = isoNow(ctx.clock);
    await ctx.store.writeAgent({
      ...current,
      resumedBy: successorId,
      ...claimBy(ctx.edges.processes, now),
      updatedAt: now,
    });
    return undefined;
  });
}

/**
 * The old record's cwd, under spawn-agent's rules: a record written before they existed, or edited by hand, may name
 * a directory outside the project, where the agent would resolve another storage dir and be taken for dead.
 */
async function resumableCwd(ctx: TeamsContext, old: AgentState): Promise<string> {
  try {
    // A worktree agent's cwd is in its own worktree, which resume re-enters (and recreates when removed).
    if (old.worktree) return worktreeCwd(ctx, old.worktree, old.cwd);
    return await resolveCwd(ctx, old.cwd);
  } catch (error) {
    if (!(error instanceof CallerError)) throw error;
    throw new CallerError(
      `${error.message} ${agentLabel(old)} cannot be resumed there: spawn a new agent with a cwd inside the project.`,
    );
  }
}

/** Give the claim back after a resume that launched nothing, so the agent can be resumed again at once. */
async function releaseClaim(ctx: TeamsContext, agent: AgentState, successorId: string): Promise<void> {
  await ctx.store.updateAgent(agent.teamName, agent.agentId, (current) => {
    if (current?.resumedBy !== successorId) return undefined;
    return { ...withoutClaim(current), updatedAt: isoNow(ctx.clock) };
  });
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
  const steps = new StepClock(ctx.clock, report);
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const continuation = input.prompt?.trim() || undefined;
  if (continuation && continuation.length > RESUME_PROMPT_MAX) {
    throw new CallerError(`prompt is ${continuation.length} characters; keep it under ${RESUME_PROMPT_MAX}`);
  }
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can resume agents");
  // Checked like spawn-agent's, before anything changes.
  const model = input.model?.trim() || input.providerId?.trim() ? resolveModel(input, team) : undefined;
  const old = await withCountedUsage(ctx, await readAgentOrFail(ctx, team, input.agentId));
  const refused = (await refusal(ctx, old)) ?? (await teamBudgetRefusal(ctx, team));
  if (refused) return fail(refused);
  const budget = resumedBudget(old, budgetInput(input.budget, "budget"));
  const cwd = await resumableCwd(ctx, old);
  if (!old.headless && !(await ctx.edges.tmux.available()))
    return fail("tmux is required for agent spawning");

  steps.progress("server", "Starting the OpenCode server");
  const server = await projectServerOrFail(ctx, "resume-agent");
  if ("success" in server) return server;

  const successorId = uuidv4();
  const claimRefused = await claimResume(ctx, old, successorId);
  if (claimRefused) return fail(claimRefused);
  let launched: Awaited<ReturnType<typeof relaunch>>;
  try {
    launched = await relaunch(
      ctx,
      { team, server, old, cwd, successorId, continuation, model, budget },
      steps,
    );
  } catch (error) {
    await releaseClaim(ctx, old, successorId);
    throw error;
  }
  if (!launched.success) {
    await releaseClaim(ctx, old, successorId);
    return launched;
  }
  const { warnings: launchWarnings = [], sessionReused, ...rest } = launched;
  return {
    ...rest,
    resumedFrom: old.agentId,
    sessionReused,
    ...(launchWarnings.length > 0 ? { warnings: launchWarnings } : {}),
  };
}

interface Relaunch {
  team: TeamConfig;
  server: ProjectServer;
  old: AgentState;
  /** The old record's cwd, checked again as spawn-agent checks it. */
  cwd: string;
  successorId: string;
  continuation: string | undefined;
  /** The model asked for; by default the one the agent had. */
  model: ResolvedModel | undefined;
  budget: Budget | undefined;
}

/** How the run that is resumed ends: interrupted, or failed when its model kept it from working. */
function endOfRun(old: AgentState, model: ResolvedModel | undefined): FinishHow {
  if (!old.failing || old.status === "inactive") {
    return {
      reason: old.statusReason ?? "inactive; resumed",
      outcome: "interrupted",
      history: "interrupted",
    };
  }
  const on = model ? ` on ${model.model}` : "";
  return {
    reason: `its model failed (${old.failing.error}); resumed${on}`,
    outcome: "failed",
    history: "failed",
  };
}

/** End what is left of the old run, then launch its successor (on the old session when the server still has it). */
async function relaunch(
  ctx: TeamsContext,
  { team, server, old, cwd, successorId, continuation, model, budget }: Relaunch,
  steps: StepClock,
): Promise<OpResult<SpawnAgentOutput & { sessionReused: boolean }>> {
  const warnings: string[] = [];
  if (old.status !== "terminated") {
    // Inactive: its run was already recorded as interrupted. End the record (its dead pane closed, color freed) so
    // that exactly one live record owns the session.
    steps.progress("finish", `Closing what is left of ${old.name}'s previous run`);
    const finished = await finishAgent(ctx, old, { ...endOfRun(old, model), resumingAs: successorId });
    warnings.push(...finished.warnings);
  }

  const sessionReused = await server.api.sessionExists(old.sessionId).catch(() => false);
  // Messages sent to it while it was stopped were kept in its inbox: the continuation hands them over.
  const reused = sessionReused ? { server: server.api, sessionId: old.sessionId } : undefined;
  const stored = await messagesToHandOver(ctx, team, old.agentId, reused);
  await markHandOverAttempted(ctx, stored);
  const handOver = stored.length > 0 ? `\n\n${handOverText(stored)}` : "";
  const text = (agentId: string) => `${continuation ?? defaultContinuation(old, agentId)}${handOver}`;
  const launched = await launchAgent(
    ctx,
    {
      team,
      server,
      role: old.role === "reviewer" ? "reviewer" : "worker",
      name: old.name,
      model: model ?? recordedModel(old),
      cwd,
      ...(old.worktree ? { worktree: { reenter: old.worktree } } : {}),
      headless: old.headless,
      ...(old.timeoutMinutes !== undefined ? { timeoutMinutes: old.timeoutMinutes } : {}),
      ...(old.plan !== undefined ? { plan: old.plan } : {}),
      taskPrompt: old.prompt,
      // A new session knows nothing: it gets its task again, then why it starts over.
      message: (agentId) => (sessionReused ? text(agentId) : `${old.prompt}\n\n${text(agentId)}`),
      ...(sessionReused ? { reuseSessionId: old.sessionId } : {}),
      ...(budget ? { budget } : {}),
      // The session goes on: what it spent before this run is not this run's (specs/usage-and-budgets.md).
      ...(sessionReused ? usageBaseOf(old) : {}),
      resumes: old.agentId,
      agentId: successorId,
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
  const allWarnings = [...warnings, ...(launched.warnings ?? [])];
  return { ...launched, sessionReused, ...(allWarnings.length > 0 ? { warnings: allWarnings } : {}) };
}

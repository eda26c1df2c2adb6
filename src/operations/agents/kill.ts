import { isoNow } from "../../clock.ts";
import type { TeamsOptions } from "../../options.ts";
import { assertAgentId, assertTeamName } from "../../state/paths.ts";
import type { AgentState, AgentStatus, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { errorText, fail, type OpResult } from "../result.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
import { agentLabel, agentNotFound } from "./agent-words.ts";
import { endUnknownAgent } from "./end-unknown-agent.ts";
import { type FinishHow, type FinishResult, finishAgent, readAgentOrFail } from "./finish.ts";
import { recordedModel } from "./model.ts";
import { findUnknownAgent } from "./unknown-agents.ts";

export interface KillAgentInput {
  teamName: string;
  agentId: string;
  force?: boolean;
  reason?: string;
}

/**
 * How the kill ended. graceful: "confirmed" (the agent called confirm-shutdown). force: "forced" (asked for),
 * "timeout" (no confirmation in time), "unreachable" (the shutdown request could not be sent), "not_running" (the
 * agent was not running a session that could answer: spawning or inactive), "unreadable" (its state file is damaged:
 * nothing to ask it with, see unknown-agents.ts).
 */
export type KillPhase = "confirmed" | "timeout" | "unreachable" | "forced" | "not_running" | "unreadable";

export interface KillAgentOutput {
  method: "graceful" | "force";
  phase: KillPhase;
  reassignedTasks: string[];
  warnings?: string[];
}

export interface KillOptions {
  /** The tool call's abort signal: stop waiting for a confirmation and finish as force. */
  signal?: AbortSignal;
  progress?: (step: string) => void;
}

/** Statuses in which an agent's model is running turns and can be asked to shut down. */
const ANSWERING: ReadonlySet<AgentStatus> = new Set(["active", "idle", "shutting_down"]);

export function shutdownRequestText(
  agent: AgentState,
  reason: string | undefined,
  timeoutMs: number,
): string {
  const ids = `{"teamName": ${JSON.stringify(agent.teamName)}, "agentId": ${JSON.stringify(agent.agentId)}}`;
  return [
    `The team leader asks you to shut down${reason ? `: ${reason}` : "."}`,
    `Start no new work. Finish or save the step you are on within ${Math.round(timeoutMs / 1000)} seconds, ` +
      `then call the \`confirm-shutdown\` tool with ${ids} and end your turn. Your session is closed after that.`,
  ].join("\n");
}

/** Wait until the agent confirms, is terminated by someone else, or the deadline passes. */
async function awaitConfirmation(
  ctx: TeamsContext,
  agent: AgentState,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<"confirmed" | "terminated" | "timeout"> {
  const interval = Math.max(10, Math.min(250, ctx.options.shutdownTimeoutMs / 20));
  for (;;) {
    const read = await ctx.store.readAgent(agent.teamName, agent.agentId);
    if (read.kind === "ok") {
      if (read.value.status === "terminated") return "terminated";
      if (read.value.shutdownConfirmedAt) return "confirmed";
    }
    if (ctx.clock.now() >= deadline || signal?.aborted) return "timeout";
    await ctx.clock.sleep(Math.min(interval, deadline - ctx.clock.now()), signal);
  }
}

/** Mark the agent shutting_down (once) and send it the request; false when the request could not be sent. */
async function requestShutdown(
  ctx: TeamsContext,
  agent: AgentState,
  reason: string | undefined,
): Promise<{ sent: boolean; requestedAt: number; warning?: string }> {
  if (agent.status === "shutting_down" && agent.shutdownRequestedAt) {
    return { sent: true, requestedAt: Date.parse(agent.shutdownRequestedAt) };
  }
  const server = await ctx.edges.projectServer();
  const requestedAt = ctx.clock.now();
  if (!server) return { sent: false, requestedAt, warning: "the project's OpenCode server is not running" };
  const now = new Date(requestedAt).toISOString();
  const deadline = new Date(requestedAt + ctx.options.shutdownTimeoutMs).toISOString();
  await ctx.store.updateAgent(agent.teamName, agent.agentId, (current) =>
    current && current.status !== "terminated"
      ? {
          ...current,
          status: "shutting_down",
          shutdownRequestedAt: now,
          shutdownDeadlineAt: deadline,
          statusReason: reason ?? "shutdown requested by the leader",
          updatedAt: now,
        }
      : undefined,
  );
  try {
    const model = recordedModel(agent).ref;
    await server.promptAsync(
      agent.sessionId,
      shutdownRequestText(agent, reason, ctx.options.shutdownTimeoutMs),
      model ? { model } : {},
    );
    return { sent: true, requestedAt };
  } catch (error) {
    return { sent: false, requestedAt, warning: `could not send the shutdown request: ${errorText(error)}` };
  }
}

/** kill-agent of an agent whose state file cannot be read: ended by force if its traces show it, else not found. */
async function killUnknownAgent(
  ctx: TeamsContext,
  team: TeamConfig,
  input: KillAgentInput,
): Promise<OpResult<KillAgentOutput>> {
  const agent = await findUnknownAgent(ctx, team.name, input.agentId);
  if (!agent) return fail(agentNotFound(input.agentId, team.name));
  if (agent.role === "leader") return fail("The team leader cannot kill itself");
  const reason = input.reason?.trim() || "killed by the leader (its state file was damaged)";
  const end = await endUnknownAgent(ctx, team, agent, reason);
  if (!end.ended) return fail(end.error);
  const warnings = [
    `Agent '${agent.name ?? agent.agentId}' had an unreadable state file: it was ended from its traces and its state file rewritten as terminated`,
    ...end.warnings,
  ];
  if (!input.force)
    warnings.unshift(
      "A graceful shutdown needs the agent's state file, which is damaged: it was ended by force",
    );
  ctx.log("info", `unknown agent ${agent.agentId} killed`, { agentId: agent.agentId });
  return {
    success: true,
    method: "force",
    phase: "unreadable",
    reassignedTasks: end.reassignedTasks,
    warnings,
  };
}

/**
 * Whether a graceful kill is over and its caller evidently gone: one sweep interval past the deadline the caller waits
 * for, so a live caller always finishes its own kill. Files from before the deadline was recorded count from the
 * request.
 */
export function killOverdue(agent: AgentState, now: number, options: TeamsOptions): boolean {
  if (agent.status !== "shutting_down") return false;
  const deadline = agent.shutdownDeadlineAt
    ? Date.parse(agent.shutdownDeadlineAt)
    : Date.parse(agent.shutdownRequestedAt ?? agent.updatedAt) + options.shutdownTimeoutMs;
  return now >= deadline + options.sweepIntervalMs;
}

/** How a kill finished by the stale sweep ends: gracefully when the agent confirmed, else as force. */
function overdueKillHow(current: AgentState): FinishHow {
  const asked = current.statusReason ?? "shutdown requested by the leader";
  return current.shutdownConfirmedAt
    ? {
        reason: `${asked}; confirmed, and finished by the stale sweep (the kill's caller was gone)`,
        outcome: "killed",
        history: "completed",
      }
    : {
        reason: `${asked}; no confirmation by ${current.shutdownDeadlineAt ?? "the deadline"}, stopped by the stale sweep (the kill's caller was gone)`,
        outcome: "interrupted",
        history: "interrupted",
      };
}

/**
 * Finish a graceful kill whose caller is gone as the caller would have. Decided from the record under finishAgent's
 * lock: a confirm-shutdown that landed after the sweep read the agent still counts. Safe to race with the caller and
 * with other sweepers: finishAgent's status write decides who ended the run.
 */
export function finishOverdueKill(ctx: TeamsContext, agent: AgentState): Promise<FinishResult> {
  return finishAgent(ctx, agent, overdueKillHow);
}

/** How a graceful kill went before the agent is finished: confirmed, timed out, or not asked (not running, unreachable). */
interface ShutdownAnswer {
  method: KillAgentOutput["method"];
  phase: KillPhase;
  warnings: string[];
}

/**
 * The graceful part of kill-agent: ask a running agent to finish and wait up to shutdownTimeoutMs for its
 * confirmation. A whole answer when another call finished the agent meanwhile.
 */
async function askToShutDown(
  ctx: TeamsContext,
  agent: AgentState,
  reasonText: string | undefined,
  options: KillOptions,
): Promise<ShutdownAnswer | OpResult<KillAgentOutput>> {
  if (!ANSWERING.has(agent.status)) return { method: "force", phase: "not_running", warnings: [] };
  options.progress?.(`Asking ${agent.name} to shut down`);
  const request = await requestShutdown(ctx, agent, reasonText);
  const warnings = request.warning ? [`Graceful shutdown skipped: ${request.warning}`] : [];
  if (!request.sent) return { method: "force", phase: "unreachable", warnings };
  options.progress?.(`Waiting for ${agent.name} to confirm`);
  const deadline = request.requestedAt + ctx.options.shutdownTimeoutMs;
  const outcome = await awaitConfirmation(ctx, agent, deadline, options.signal);
  if (outcome === "terminated") {
    // Another call (a concurrent kill) finished it; report how that one ended.
    const read = await ctx.store.readAgent(agent.teamName, agent.agentId);
    const confirmed = read.kind === "ok" && read.value.outcome === "killed";
    return {
      success: true,
      method: confirmed ? "graceful" : "force",
      phase: confirmed ? "confirmed" : "forced",
      reassignedTasks: [],
      warnings: ["The agent was finished by another call meanwhile"],
    };
  }
  if (outcome === "confirmed") return { method: "graceful", phase: "confirmed", warnings };
  warnings.push(
    `${agent.name} did not confirm within ${ctx.options.shutdownTimeoutMs} ms; it was stopped by force`,
  );
  return { method: "force", phase: "timeout", warnings };
}

/**
 * kill-agent: leader only; not the leader itself; not an agent already terminated. Graceful by default: the agent is
 * asked to finish and confirm (confirm-shutdown) and is finished as force when it does not within shutdownTimeoutMs.
 */
export async function killAgent(
  ctx: TeamsContext,
  input: KillAgentInput,
  callerSessionId: string,
  options: KillOptions = {},
): Promise<OpResult<KillAgentOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can kill agents");
  if (input.agentId === team.leader) return fail("The team leader cannot kill itself");
  const read = await ctx.store.readAgent(team.name, input.agentId);
  if (read.kind !== "ok") return killUnknownAgent(ctx, team, input);
  const agent = read.value;
  if (agent.role === "leader") return fail("The team leader cannot kill itself");
  if (agent.status === "terminated") return fail(`${agentLabel(agent)} is already terminated`);

  const reasonText = input.reason?.trim() || undefined;
  const asked = input.force
    ? { method: "force" as const, phase: "forced" as const, warnings: [] }
    : await askToShutDown(ctx, agent, reasonText, options);
  if ("success" in asked) return asked;
  const { method, phase, warnings } = asked;

  options.progress?.(`Stopping ${agent.name}`);
  const reason =
    reasonText ??
    (method === "graceful" ? "shut down at the leader's request" : `killed by the leader (${phase})`);
  const graceful = method === "graceful";
  const finished = await finishAgent(ctx, agent, {
    reason,
    outcome: graceful ? "killed" : "interrupted",
    history: graceful ? "completed" : "interrupted",
  });
  warnings.push(...finished.warnings);
  ctx.log("info", `agent ${agent.name} killed`, { agentId: agent.agentId, method, phase });
  return {
    success: true,
    method,
    phase,
    reassignedTasks: finished.reassignedTasks,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/** confirm-shutdown: the agent itself (by its session) confirms a requested graceful shutdown. */
export async function confirmShutdown(
  ctx: TeamsContext,
  input: { teamName: string; agentId: string },
  callerSessionId: string,
): Promise<OpResult<{ message: string }>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const team = await loadTeam(ctx, input.teamName);
  const agent = await readAgentOrFail(ctx, team, input.agentId);
  if (agent.sessionId !== callerSessionId)
    return fail(`Agent '${input.agentId}' does not belong to this session`);
  let refusal: string | undefined;
  const now = isoNow(ctx.clock);
  await ctx.store.updateAgent(team.name, agent.agentId, (current) => {
    if (!current) {
      refusal = agentNotFound(input.agentId, team.name);
      return undefined;
    }
    if (current.status === "terminated") {
      refusal = `${agentLabel(current)} is already terminated`;
      return undefined;
    }
    if (current.status !== "shutting_down") {
      refusal = `No shutdown was requested for agent '${current.name}'; keep working`;
      return undefined;
    }
    return current.shutdownConfirmedAt ? undefined : { ...current, shutdownConfirmedAt: now, updatedAt: now };
  });
  if (refusal) return fail(refusal);
  return {
    success: true,
    message: "Shutdown confirmed. Stop now: end your turn without further tool calls.",
  };
}

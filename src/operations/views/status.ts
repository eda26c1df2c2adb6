import type { ServerState } from "../../edges/server-report.ts";
import type { AgentView } from "../../state/agent-view.ts";
import { assertAgentId } from "../../state/paths.ts";
import type { AgentRole, AgentStatus, AgentWorktree, ModelFailure } from "../../state/schemas.ts";
import { agentNotFound } from "../agents/agent-words.ts";
import { listUnknownAgents, type UnknownAgent } from "../agents/unknown-agents.ts";
import type { TeamsContext } from "../context.ts";
import { type WaitingView, waitingView } from "../liveness/waiting.ts";
import { fail, type OpResult } from "../result.ts";
import { loadTeam, requireMember } from "../team/identity.ts";
import {
  type AgentUsageView,
  agentUsageView,
  type TeamUsageView,
  teamUsageView,
} from "../usage/usage-view.ts";
import { liveWorktreeWarnings } from "../worktrees/worktrees.ts";

export interface GetAgentStatusInput {
  teamName: string;
  agentId?: string;
  includeServer: boolean;
  includeTerminated: boolean;
}

/** AgentStatusResponse as specs/get-agent-status.md lists it. */
export interface AgentStatusResponse {
  agentId: string;
  name: string;
  role: AgentRole;
  model: string;
  status: AgentStatus;
  isActive: boolean;
  color: string;
  heartbeatTs: string;
  heartbeatAge: number;
  heartbeatHealthy: boolean;
  sessionId: string;
  paneId?: string;
  cwd: string;
  consecutiveMisses: number;
  lastError?: string;
  /** Its model failed a turn and none has succeeded since (specs/get-agent-status.md); null otherwise. */
  failing: Omit<ModelFailure, "notified"> | null;
  /** The permission request or question the agent waits on (specs/get-agent-status.md). */
  waitingFor: WaitingView | null;
  sessionRotationCount: number;
  createdAt: string;
  terminatedAt?: string;
  worktree?: AgentWorktree;
  /** This run's tokens and cost as last counted from the event stream, and its budget (specs/usage-and-budgets.md). */
  usage: AgentUsageView;
}

/**
 * An agent whose state file cannot be read: the same keys, its last known status (else `inactive`), `lastError` saying
 * what happened and that kill-agent ends it, null where its traces do not tell.
 */
export interface UnknownStatusResponse {
  agentId: string;
  name: string | null;
  role: AgentRole | null;
  model: string | null;
  status: AgentStatus;
  isActive: boolean;
  color: string | null;
  heartbeatTs: string | null;
  heartbeatAge: number | null;
  heartbeatHealthy: null;
  sessionId: string | null;
  paneId?: string;
  cwd: string | null;
  consecutiveMisses: null;
  lastError: string;
  failing: null;
  waitingFor: null;
  sessionRotationCount: null;
  createdAt: string | null;
  usage: null;
}

export interface ServerStatus {
  port: number;
  pid: number;
  isRunning: boolean;
  /** running, unresponsive (alive, not answering: left running), unauthorized, unprotected or stopped. */
  state: ServerState;
  activeSessions: number;
  hostname: string;
  startedAt: string;
}

export interface StatusSummary {
  total: number;
  active: number;
  idle: number;
  /** Running agents blocked on a permission request or a question. */
  waiting: number;
  inactive: number;
  shuttingDown: number;
  terminated: number;
  /** The team's usage (its agents summed, the leader apart); only when the whole team is listed. */
  usage?: TeamUsageView;
}

export interface GetAgentStatusOutput {
  agents: (AgentStatusResponse | UnknownStatusResponse)[];
  server?: ServerStatus;
  summary: StatusSummary;
  /** Agents whose state file is damaged (shown or skipped) and damaged heartbeat slots. */
  warnings?: string[];
}

/** Statuses in which the agent is still in the team's service. */
const ACTIVE_STATUSES: ReadonlySet<AgentStatus> = new Set(["spawning", "active", "idle"]);

export function toStatusResponse(
  view: AgentView,
  now: number,
  staleThresholdMs: number,
): AgentStatusResponse {
  const { state } = view;
  const ageMs = Math.max(0, now - Date.parse(view.heartbeatTs));
  return {
    agentId: state.agentId,
    name: state.name,
    role: state.role,
    model: state.model,
    status: state.status,
    isActive: ACTIVE_STATUSES.has(state.status),
    color: state.color,
    heartbeatTs: view.heartbeatTs,
    heartbeatAge: ageMs / 1000,
    heartbeatHealthy: ageMs < staleThresholdMs,
    sessionId: state.sessionId,
    ...(state.paneId ? { paneId: state.paneId } : {}),
    cwd: state.cwd,
    consecutiveMisses: state.consecutiveMisses,
    ...(state.lastError ? { lastError: state.lastError } : {}),
    failing: state.failing
      ? { kind: state.failing.kind, error: state.failing.error, since: state.failing.since }
      : null,
    waitingFor: waitingView(state),
    sessionRotationCount: state.sessionRotationCount,
    createdAt: state.createdAt,
    ...(state.terminatedAt ? { terminatedAt: state.terminatedAt } : {}),
    ...(state.worktree ? { worktree: state.worktree } : {}),
    usage: agentUsageView(state),
  };
}

export function summarize(agents: readonly (AgentStatusResponse | UnknownStatusResponse)[]): StatusSummary {
  const count = (status: AgentStatus) => agents.filter((agent) => agent.status === status).length;
  return {
    total: agents.length,
    active: count("active"),
    idle: count("idle"),
    waiting: agents.filter((agent) => agent.waitingFor !== null).length,
    inactive: count("inactive"),
    shuttingDown: count("shutting_down"),
    terminated: count("terminated"),
  };
}

export function unknownStatusResponse(agent: UnknownAgent, now: number): UnknownStatusResponse {
  return {
    agentId: agent.agentId,
    name: agent.name,
    role: agent.role,
    model: agent.model,
    status: agent.status,
    isActive: ACTIVE_STATUSES.has(agent.status),
    color: agent.color,
    heartbeatTs: agent.heartbeatTs,
    heartbeatAge: agent.heartbeatTs ? Math.max(0, now - Date.parse(agent.heartbeatTs)) / 1000 : null,
    heartbeatHealthy: null,
    sessionId: agent.sessionId,
    ...(agent.paneId ? { paneId: agent.paneId } : {}),
    cwd: agent.cwd,
    consecutiveMisses: null,
    lastError: agent.warning,
    failing: null,
    waitingFor: null,
    sessionRotationCount: null,
    createdAt: agent.createdAt,
    usage: null,
  };
}

/**
 * The project server as ServerManager sees it: recorded, its pid, command line and listening socket ours, and healthy
 * with our credentials (`state: "running"`). A server that is alive but does not answer is `unresponsive`, with a
 * warning: it is left running. `activeSessions` is the recorded count of running agent sessions (kept by spawn, kill
 * and the liveness sweep); a server that is not running has none.
 */
async function serverStatus(ctx: TeamsContext, warnings: string[]): Promise<ServerStatus | undefined> {
  const report = await ctx.edges.serverControl?.report();
  if (!report?.info) return undefined;
  const { pid, port, hostname, startedAt } = report.info;
  if (report.state !== "running" && report.state !== "stopped") {
    warnings.push(`The project server is ${report.state}: ${report.detail}.`);
  }
  const holdsSessions = report.state === "running" || report.state === "unresponsive";
  return {
    port,
    pid,
    isRunning: report.state === "running",
    state: report.state,
    activeSessions: holdsSessions ? report.info.activeSessions : 0,
    hostname,
    startedAt,
  };
}

/** get-agent-status (specs/get-agent-status.md): read-only, any team member. */
export async function getAgentStatus(
  ctx: TeamsContext,
  input: GetAgentStatusInput,
  sessionId: string,
): Promise<OpResult<GetAgentStatusOutput>> {
  const team = await loadTeam(ctx, input.teamName);
  await requireMember(ctx, team, sessionId);
  const now = ctx.clock.now();
  const threshold = ctx.options.staleThresholdMs;
  const warnings: string[] = [];
  let agents: GetAgentStatusOutput["agents"];
  let shown: AgentView[] = [];
  let teamUsage: TeamUsageView | undefined;
  if (input.agentId !== undefined) {
    assertAgentId(input.agentId);
    const read = await ctx.store.readAgentView(team.name, input.agentId);
    if (read.kind === "ok") {
      warnings.push(...read.warnings);
      shown = [read.value];
      agents = [toStatusResponse(read.value, now, threshold)];
    } else {
      const traced = await listUnknownAgents(ctx, team.name);
      const unknown = traced.agents.find((agent) => agent.agentId === input.agentId);
      if (!unknown) return fail(agentNotFound(input.agentId, team.name), traced.skipped);
      warnings.push(unknown.warning);
      agents = [unknownStatusResponse(unknown, now)];
    }
  } else {
    const listed = await ctx.store.listAgentViews(team.name);
    warnings.push(...listed.warnings);
    teamUsage = teamUsageView(
      listed.items.map((view) => view.state),
      team.budget,
    );
    shown = listed.items.filter((view) => input.includeTerminated || view.state.status !== "terminated");
    agents = shown.map((view) => toStatusResponse(view, now, threshold));
    const traced = await listUnknownAgents(ctx, team.name);
    for (const unknown of traced.agents) {
      warnings.push(unknown.warning);
      agents.push(unknownStatusResponse(unknown, now));
    }
    warnings.push(...traced.skipped);
  }
  warnings.push(...(await liveWorktreeWarnings(ctx, shown)));
  const server = input.includeServer ? await serverStatus(ctx, warnings) : undefined;
  const reported = ctx.store.withDamageNotes(team.name, warnings);
  return {
    success: true,
    agents,
    ...(server ? { server } : {}),
    summary: { ...summarize(agents), ...(teamUsage ? { usage: teamUsage } : {}) },
    ...(reported.length > 0 ? { warnings: reported } : {}),
  };
}

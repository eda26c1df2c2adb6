import { connect } from "node:net";
import { SdkOpencodeApi, serverAuthFromEnv } from "../edges/opencode-client.ts";
import { pidAlive } from "../edges/process.ts";
import { assertAgentId } from "../state/paths.ts";
import {
  type AgentRole,
  type AgentStatus,
  type AgentWorktree,
  type ListedStatus,
  ServerInfoSchema,
} from "../state/schemas.ts";
import { readJson } from "../state/store.ts";
import type { AgentView } from "../state/team-store.ts";
import type { TeamsContext } from "./context.ts";
import { loadTeam, requireMember } from "./identity.ts";
import { fail, type OpResult } from "./result.ts";
import { findUnknownAgent, listUnknownAgents, type UnknownAgent } from "./unknown-agents.ts";
import { liveWorktreeWarnings } from "./worktrees.ts";

export interface GetAgentStatusInput {
  teamName: string;
  agentId?: string;
  includeServer: boolean;
  includeTerminated: boolean;
}

/** Seed 000's AgentStatusResponse. */
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
  sessionRotationCount: number;
  createdAt: string;
  terminatedAt?: string;
  worktree?: AgentWorktree;
}

/**
 * An agent whose state file cannot be read: the same keys, `status: "unknown"`, null where its traces do not tell.
 */
export interface UnknownStatusResponse {
  agentId: string;
  name: string | null;
  role: AgentRole | null;
  model: string | null;
  status: "unknown";
  isActive: null;
  color: string | null;
  heartbeatTs: string | null;
  heartbeatAge: number | null;
  heartbeatHealthy: null;
  sessionId: string | null;
  paneId?: string;
  cwd: string | null;
  consecutiveMisses: null;
  sessionRotationCount: null;
  createdAt: string | null;
}

export interface ServerStatus {
  port: number;
  pid: number;
  isRunning: boolean;
  activeSessions: number;
  hostname: string;
  startedAt: string;
}

export interface StatusSummary {
  total: number;
  active: number;
  idle: number;
  inactive: number;
  shuttingDown: number;
  terminated: number;
}

export interface GetAgentStatusOutput {
  agents: (AgentStatusResponse | UnknownStatusResponse)[];
  server?: ServerStatus;
  summary: StatusSummary;
  /** Agents shown as unknown (their state file is damaged) and damaged heartbeat slots. */
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
    sessionRotationCount: state.sessionRotationCount,
    createdAt: state.createdAt,
    ...(state.terminatedAt ? { terminatedAt: state.terminatedAt } : {}),
    ...(state.worktree ? { worktree: state.worktree } : {}),
  };
}

export function summarize(agents: readonly (AgentStatusResponse | UnknownStatusResponse)[]): StatusSummary {
  const count = (status: ListedStatus) => agents.filter((agent) => agent.status === status).length;
  return {
    total: agents.length,
    active: count("active"),
    idle: count("idle"),
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
    status: "unknown",
    isActive: null,
    color: agent.color,
    heartbeatTs: agent.heartbeatTs,
    heartbeatAge: agent.heartbeatTs ? Math.max(0, now - Date.parse(agent.heartbeatTs)) / 1000 : null,
    heartbeatHealthy: null,
    sessionId: agent.sessionId,
    ...(agent.paneId ? { paneId: agent.paneId } : {}),
    cwd: agent.cwd,
    consecutiveMisses: null,
    sessionRotationCount: null,
    createdAt: agent.createdAt,
  };
}

/** Whether something accepts TCP connections on host:port within `timeoutMs`. */
export function tcpAccepts(hostname: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port });
    const done = (ok: boolean) => {
      socket.removeAllListeners();
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * The project server as recorded, checked three ways: its PID exists, its port accepts a connection and
 * `GET /global/health` says healthy. `activeSessions` is the recorded count of running agent sessions (kept by spawn,
 * kill and the liveness sweep); a server that is not running has none.
 */
async function serverStatus(ctx: TeamsContext): Promise<ServerStatus | undefined> {
  const info = await readJson(ctx.store.paths.serverInfo(ctx.projectRoot), ServerInfoSchema);
  if (info.kind !== "ok") return undefined;
  const { pid, port, hostname, startedAt } = info.value;
  let isRunning = pidAlive(pid) && (await tcpAccepts(hostname, port));
  if (isRunning) {
    const api =
      (await ctx.edges.projectServer().catch(() => undefined)) ??
      new SdkOpencodeApi(`http://${hostname}:${port}`, {
        directory: ctx.projectRoot,
        ...serverAuthFromEnv(),
      });
    isRunning = await api.healthy(1_000);
  }
  const activeSessions = isRunning ? info.value.activeSessions : 0;
  return { port, pid, isRunning, activeSessions, hostname, startedAt };
}

/** get-agent-status (seed 000): read-only, any team member. */
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
  if (input.agentId !== undefined) {
    assertAgentId(input.agentId);
    const read = await ctx.store.readAgentView(team.name, input.agentId);
    if (read.kind === "ok") {
      warnings.push(...read.warnings);
      shown = [read.value];
      agents = [toStatusResponse(read.value, now, threshold)];
    } else {
      const unknown = await findUnknownAgent(ctx, team.name, input.agentId);
      if (!unknown) return fail(`Agent '${input.agentId}' not found in team '${team.name}'`);
      warnings.push(unknown.warning);
      agents = [unknownStatusResponse(unknown, now)];
    }
  } else {
    const listed = await ctx.store.listAgentViews(team.name);
    warnings.push(...listed.warnings);
    shown = listed.items.filter((view) => input.includeTerminated || view.state.status !== "terminated");
    agents = shown.map((view) => toStatusResponse(view, now, threshold));
    for (const unknown of await listUnknownAgents(ctx, team.name)) {
      warnings.push(unknown.warning);
      agents.push(unknownStatusResponse(unknown, now));
    }
  }
  warnings.push(...(await liveWorktreeWarnings(ctx, shown)));
  const server = input.includeServer ? await serverStatus(ctx) : undefined;
  return {
    success: true,
    agents,
    ...(server ? { server } : {}),
    summary: summarize(agents),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

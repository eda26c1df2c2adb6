import type { AgentView } from "../../state/agent-view.ts";
import { type AgentStatus, AgentStatusSchema, type AgentWorktree } from "../../state/schemas.ts";
import { listUnknownAgents, type UnknownAgent } from "../agents/unknown-agents.ts";
import type { TeamsContext } from "../context.ts";
import { type WaitingView, waitingView } from "../liveness/waiting.ts";
import { CallerError, type OpResult } from "../result.ts";
import { loadTeam, resolveCaller } from "../team/identity.ts";
import { type TeamUsageView, teamUsageView, type UsageKeys, usageKeys } from "../usage/usage-view.ts";

/** The contract's lifecycle statuses: an agent whose file is damaged keeps one of them too (its last known). */
export const LIFECYCLE_STATUSES = AgentStatusSchema.options;

export const HEALTH_STATUSES = ["healthy", "degraded", "critical", "unknown", "error"] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];

/** One agent, always the same keys: null where a value is unknown, never a missing key. */
export interface AgentListing {
  agent_id: string;
  name: string | null;
  team: string;
  role: string | null;
  lifecycle_status: AgentStatus;
  health_status: HealthStatus;
  /** The permission request or question the agent waits on, null otherwise (specs/list-agents.md). */
  waitingFor: WaitingView | null;
  summary: {
    updates: number | null;
    last_activity: string | null;
    age_days: number | null;
    primary_tags: string[];
  };
  /** Liveness counts and the run's usage as last counted from the event stream (null keys: not counted yet). */
  metrics:
    | ({
        heartbeat_age_s: number;
        consecutive_misses: number;
        session_rotations: number;
      } & UsageKeys)
    | null;
  metadata: {
    created: string | null;
    last_update: string | null;
    model: string | null;
    color: string | null;
    pane_id: string | null;
    session_id: string | null;
    tags: string[];
    plan: string | null;
    worktree: AgentWorktree | null;
    notes_preview: string | null;
  };
  state: { loaded_in_process: boolean; metrics_available: boolean; error: string | null };
}

export interface ListAgentsInput {
  teamName?: string;
  grouped: boolean;
  statusFilter?: AgentStatus;
  healthFilter?: HealthStatus;
  summaryOnly: boolean;
}

export interface ListAgentsSummary {
  total: number;
  by_status: Partial<Record<AgentStatus, number>>;
  by_health: Partial<Record<HealthStatus, number>>;
  /** Agents blocked on a permission request or a question. */
  waiting: number;
  loaded_count: number;
  /** Per team listed: its agents' usage summed, the leader's apart, and its budget. */
  usage: Record<string, TeamUsageView>;
}

export type ListAgentsOutput = {
  summary: ListAgentsSummary;
  agents?: AgentListing[] | Partial<Record<AgentStatus, AgentListing[]>>;
  warnings?: string[];
};

/**
 * The health rule, in order (first match wins):
 * terminated -> unknown (nothing left to judge); inactive -> critical; its model failing (an error ended a turn and no
 * turn has succeeded since, whatever signs of life followed) -> error; heartbeat older than the stale threshold or a miss counted -> critical; older than half the threshold ->
 * degraded; otherwise healthy.
 */
export function healthOf(view: AgentView, now: number, staleThresholdMs: number): HealthStatus {
  const { state } = view;
  if (state.status === "terminated") return "unknown";
  if (state.status === "inactive") return "critical";
  if (state.failing) return "error";
  const lastSign = Date.parse(view.heartbeatTs);
  // A waiting agent cannot heartbeat; it is alive and needs an answer, not a rescue. A leader is a person's OpenCode:
  // it sends no heartbeats and is idle for as long as the person reads, and no sweep ever judges it, so a quiet leader
  // is healthy (see specs/list-agents.md).
  if (waitingView(state) || state.role === "leader") return "healthy";
  const age = now - lastSign;
  if (age >= staleThresholdMs || state.consecutiveMisses > 0) return "critical";
  if (age >= staleThresholdMs / 2) return "degraded";
  return "healthy";
}

const DAY_MS = 86_400_000;

/** One readable agent, from its files alone: no server is asked (its usage is counted from the event stream). */
function toListing(ctx: TeamsContext, view: AgentView): AgentListing {
  const { state, heartbeat } = view;
  const now = ctx.clock.now();
  const usage = state.usage;
  const lastActivity = [view.heartbeatTs, state.lastEventAt]
    .filter((v): v is string => Boolean(v))
    .sort()
    .at(-1);
  return {
    agent_id: state.agentId,
    name: state.name,
    team: state.teamName,
    role: state.role,
    lifecycle_status: state.status,
    health_status: healthOf(view, now, ctx.options.staleThresholdMs),
    waitingFor: waitingView(state),
    summary: {
      updates: heartbeat?.updates ?? 0,
      last_activity: lastActivity ?? null,
      age_days: Math.max(0, Math.floor((now - Date.parse(state.createdAt)) / DAY_MS)),
      primary_tags: state.tags.slice(0, 3),
    },
    metrics: {
      heartbeat_age_s: Math.max(0, (now - Date.parse(view.heartbeatTs)) / 1000),
      consecutive_misses: state.consecutiveMisses,
      session_rotations: state.sessionRotationCount,
      ...usageKeys(usage?.totals),
    },
    metadata: {
      created: state.createdAt,
      last_update: state.updatedAt,
      model: state.model,
      color: state.color,
      pane_id: state.paneId ?? null,
      session_id: state.sessionId,
      tags: state.tags,
      plan: state.plan ?? null,
      worktree: state.worktree ?? null,
      notes_preview: state.prompt ? state.prompt.slice(0, 100) : null,
    },
    state: {
      loaded_in_process: usage !== undefined,
      metrics_available: usage !== undefined,
      // The model's failure first: it is what keeps the agent from working.
      error: state.failing ? `model failing (${state.failing.kind}): ${state.failing.error}` : null,
    },
  };
}

/**
 * An agent whose state file cannot be read: its last known status (else inactive), health error, what its traces
 * tell, null for the rest, the warning (what happened, and that kill-agent ends it) as its error.
 */
function unknownListing(agent: UnknownAgent, now: number): AgentListing {
  return {
    agent_id: agent.agentId,
    name: agent.name,
    team: agent.teamName,
    role: agent.role,
    lifecycle_status: agent.status,
    health_status: "error",
    waitingFor: null,
    summary: {
      updates: agent.updates,
      last_activity: agent.heartbeatTs,
      age_days: agent.createdAt
        ? Math.max(0, Math.floor((now - Date.parse(agent.createdAt)) / DAY_MS))
        : null,
      primary_tags: [],
    },
    metrics: null,
    metadata: {
      created: agent.createdAt,
      last_update: null,
      model: agent.model,
      color: agent.color,
      pane_id: agent.paneId,
      session_id: agent.sessionId,
      tags: [],
      plan: null,
      worktree: null,
      notes_preview: null,
    },
    state: { loaded_in_process: false, metrics_available: false, error: agent.warning },
  };
}

function summarize(listings: AgentListing[], usage: Record<string, TeamUsageView>): ListAgentsSummary {
  const summary: ListAgentsSummary = {
    total: listings.length,
    by_status: {},
    by_health: {},
    waiting: 0,
    loaded_count: 0,
    usage,
  };
  for (const listing of listings) {
    summary.by_status[listing.lifecycle_status] = (summary.by_status[listing.lifecycle_status] ?? 0) + 1;
    summary.by_health[listing.health_status] = (summary.by_health[listing.health_status] ?? 0) + 1;
    if (listing.state.loaded_in_process) summary.loaded_count++;
    if (listing.waitingFor) summary.waiting++;
  }
  return summary;
}

/** Teams the caller may see: the named one (if it is a member), else every team it belongs to. No session: all (the CLI). */
async function visibleTeams(ctx: TeamsContext, teamName: string | undefined, sessionId: string | undefined) {
  if (teamName !== undefined) {
    const team = await loadTeam(ctx, teamName);
    if (sessionId !== undefined && !(await resolveCaller(ctx, team, sessionId))) {
      throw new CallerError(
        `This session is not a member of team '${teamName}'. Only the team's leader and its agents may do this.`,
      );
    }
    return [team.name];
  }
  const names = await ctx.store.listTeamNames();
  if (sessionId === undefined) return names;
  const visible: string[] = [];
  for (const name of names) {
    const team = await ctx.store.readTeam(name);
    if (team.kind === "ok" && (await resolveCaller(ctx, team.value, sessionId))) visible.push(name);
  }
  return visible;
}

export async function listAgents(
  ctx: TeamsContext,
  input: ListAgentsInput,
  sessionId: string | undefined,
): Promise<OpResult<ListAgentsOutput>> {
  const teams = await visibleTeams(ctx, input.teamName, sessionId);
  const warnings: string[] = [];
  const views: AgentView[] = [];
  const unknown: AgentListing[] = [];
  const usage: Record<string, TeamUsageView> = {};
  for (const teamName of teams) {
    const listed = await ctx.store.listAgentViews(teamName);
    views.push(...listed.items);
    const team = await ctx.store.readTeam(teamName);
    usage[teamName] = teamUsageView(
      listed.items.map((view) => view.state),
      team.kind === "ok" ? team.value.budget : undefined,
    );
    const own = [...listed.warnings];
    const traced = await listUnknownAgents(ctx, teamName);
    for (const agent of traced.agents) {
      unknown.push(unknownListing(agent, ctx.clock.now()));
      own.push(agent.warning);
    }
    own.push(...traced.skipped);
    warnings.push(...ctx.store.withDamageNotes(teamName, own));
  }
  const all = [...views.map((view) => toListing(ctx, view)), ...unknown];
  const listings = all.filter(
    (l) =>
      (input.statusFilter === undefined || l.lifecycle_status === input.statusFilter) &&
      (input.healthFilter === undefined || l.health_status === input.healthFilter),
  );
  const output: ListAgentsOutput = { summary: summarize(listings, usage) };
  if (!input.summaryOnly) {
    if (input.grouped) {
      const groups: Partial<Record<AgentStatus, AgentListing[]>> = {};
      for (const listing of listings) {
        const group = groups[listing.lifecycle_status] ?? [];
        group.push(listing);
        groups[listing.lifecycle_status] = group;
      }
      output.agents = groups;
    } else {
      output.agents = listings;
    }
  }
  if (warnings.length > 0) output.warnings = warnings;
  return { success: true, ...output };
}

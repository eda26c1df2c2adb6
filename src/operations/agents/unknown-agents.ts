import path from "node:path";
import type { UnreadableAgent } from "../../state/agent-listing.ts";
import type { AgentRole, AgentStatus, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { agentLabel } from "./agent-words.ts";

/**
 * An agent whose state file cannot be read (damaged and moved aside, or gone) while traces of it remain. It may still
 * run, so every listing shows it, with its last known status (else `inactive`), health `error` and a warning, and
 * kill-agent can end it. What is known comes from the team's members list and what the damaged copy still says; null
 * where nothing tells.
 */
export interface UnknownAgent {
  agentId: string;
  teamName: string;
  name: string | null;
  role: AgentRole | null;
  model: string | null;
  color: string | null;
  sessionId: string | null;
  paneId: string | null;
  cwd: string | null;
  createdAt: string | null;
  /** The status the damaged copy still says, else `inactive` (not known to run): listings show it. */
  status: AgentStatus;
  /** The heartbeat slot's, else the damaged copy's. */
  heartbeatTs: string | null;
  /** Heartbeats the slot counted; null without a slot. */
  updates: number | null;
  /** What happened and what to do; given by every listing that shows the agent. */
  warning: string;
  trace: UnreadableAgent;
}

/** The agents listings show from their traces, and a warning for each trace skipped as no agent of the team. */
export interface UnknownAgents {
  agents: UnknownAgent[];
  skipped: string[];
}

function whatHappened(trace: UnreadableAgent): string {
  return trace.movedTo
    ? `was damaged (${trace.problem}) and moved aside to ${path.basename(trace.movedTo)}`
    : "is missing";
}

function describe(trace: UnreadableAgent, name: string | null, status: AgentStatus): string {
  const who = name ? agentLabel({ name, agentId: trace.agentId }) : `Agent ${trace.agentId}`;
  const shown = trace.salvaged.status
    ? `it is shown with its last known status, ${status}`
    : "it is shown as inactive, its status being unknown";
  return (
    `${who} cannot be read: its state file ${whatHappened(trace)}; ${shown}. It may still run and hold its pane, ` +
    "session, tasks and color: end it with kill-agent."
  );
}

async function toUnknown(
  ctx: TeamsContext,
  teamName: string,
  trace: UnreadableAgent,
  member: TeamConfig["members"][number] | undefined,
): Promise<UnknownAgent> {
  const { salvaged } = trace;
  const { record } = await ctx.store.readHeartbeat(teamName, trace.agentId);
  const name = member?.name ?? salvaged.name ?? null;
  const status = salvaged.status ?? "inactive";
  return {
    agentId: trace.agentId,
    teamName,
    name,
    role: member?.role ?? salvaged.role ?? null,
    model: salvaged.model ?? null,
    color: salvaged.color ?? null,
    sessionId: salvaged.sessionId ?? null,
    paneId: salvaged.paneId ?? null,
    cwd: salvaged.cwd ?? null,
    createdAt: member?.joinedAt ?? salvaged.createdAt ?? null,
    status,
    heartbeatTs: record?.heartbeatTs ?? salvaged.heartbeatTs ?? null,
    updates: record?.updates ?? null,
    warning: describe(trace, name, status),
    trace,
  };
}

/** A trace of no member whose copy says nothing: a stray file, not an agent of the team. */
function strayWarning(teamName: string, trace: UnreadableAgent): string {
  return (
    `Skipped agent id ${trace.agentId} in team '${teamName}': never a member of the team, and nothing of it is ` +
    `readable (its state file ${whatHappened(trace)}). It is not listed; remove the file if it is not yours.`
  );
}

/**
 * The team's agents that only their traces still show (usually none: one directory listing). A trace is an agent when
 * the team's members list names it or its damaged copy still says something of it; any other is skipped, with a warning.
 */
export async function listUnknownAgents(ctx: TeamsContext, teamName: string): Promise<UnknownAgents> {
  const traces = await ctx.store.listUnreadableAgents(teamName);
  if (traces.length === 0) return { agents: [], skipped: [] };
  const team = await ctx.store.readTeam(teamName);
  // Without the team's config no trace can be told a stranger: all are listed.
  const members = team.kind === "ok" ? team.value.members : undefined;
  const listed: Promise<UnknownAgent>[] = [];
  const skipped: string[] = [];
  for (const trace of traces) {
    const member = members?.find((m) => m.agentId === trace.agentId);
    const stray = members !== undefined && !member && Object.keys(trace.salvaged).length === 0;
    if (stray) skipped.push(strayWarning(teamName, trace));
    else listed.push(toUnknown(ctx, teamName, trace, member));
  }
  return { agents: await Promise.all(listed), skipped };
}

export async function findUnknownAgent(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<UnknownAgent | undefined> {
  return (await listUnknownAgents(ctx, teamName)).agents.find((agent) => agent.agentId === agentId);
}

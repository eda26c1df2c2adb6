import path from "node:path";
import { isoNow } from "../../clock.ts";
import type { MarkedPane } from "../../edges/tmux-api.ts";
import type { AgentRole, AgentState, AgentStatus, TeamConfig } from "../../state/schemas.ts";
import type { UnreadableAgent } from "../../state/team-store.ts";
import type { TeamsContext } from "../context.ts";
import { agentEnded } from "../history/run-history.ts";
import { errorText } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { reassignTasksOf } from "../team/task.ts";
import { closeAgentPane, teamSessionName, teamWindowName } from "./agent-pane.ts";
import { agentLabel } from "./agent-words.ts";
import { releaseColor } from "./color-pool.ts";
import { abortEndedSession } from "./session-abort.ts";

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

/** The agent's pane, found by our mark: where the damaged copy says, where we place panes, then the default server. */
async function findMarkedPane(
  ctx: TeamsContext,
  agent: UnknownAgent,
  warnings: string[],
): Promise<{ pane: MarkedPane; socket: string | undefined } | undefined> {
  const sockets = [...new Set([agent.trace.salvaged.socket, ctx.options.tmuxSocket, undefined])];
  for (const socket of sockets) {
    try {
      const pane = await ctx.edges.tmux.findAgentPane(socket, agent.agentId);
      if (pane) return { pane, socket };
    } catch (error) {
      warnings.push(
        `Could not look for its pane on tmux ${socket ? `socket '${socket}'` : "default server"}: ${errorText(error)}`,
      );
    }
  }
  return undefined;
}

/** The terminated record that replaces the damaged file, so listings are clean again; unknown fields get neutral values. */
function terminatedRecord(
  ctx: TeamsContext,
  agent: UnknownAgent,
  known: { sessionId: string | undefined; hasPane: boolean },
  reason: string,
  now: string,
): AgentState {
  const { sessionId } = known;
  const { salvaged } = agent.trace;
  return {
    version: 1,
    agentId: agent.agentId,
    name: agent.name ?? `unknown-${agent.agentId.slice(0, 8)}`,
    teamName: agent.teamName,
    role: agent.role === "reviewer" ? "reviewer" : "worker",
    model: agent.model ?? "unknown",
    status: "terminated",
    color: agent.color ?? "unknown",
    heartbeatTs: agent.heartbeatTs ?? now,
    sessionId: sessionId ?? "",
    cwd: agent.cwd ?? ctx.projectRoot,
    consecutiveMisses: 0,
    sessionRotationCount: 0,
    createdAt: agent.createdAt ?? now,
    updatedAt: now,
    terminatedAt: now,
    statusReason: `${reason} (its state file was damaged; this record was rebuilt from what was left)`,
    prompt: salvaged.prompt ?? "",
    headless: !known.hasPane && agent.paneId === null,
    // resume-agent continues an interrupted run; with neither its session nor its prompt known there is nothing to
    // continue, so it is recorded as ended for good.
    outcome: sessionId || salvaged.prompt ? "interrupted" : "killed",
    tags: [],
  };
}

export type UnknownEnd =
  | { ended: true; reassignedTasks: string[]; warnings: string[] }
  | { ended: false; error: string };

/**
 * End an unknown agent by force (nothing readable to ask it with): write its terminated record under its lock, which
 * decides who ends it; abort its session; close its pane, found by our `@agent_id` mark only; hand back its tasks;
 * release its color; record the end in the history. The session comes from the pane's `@opencode_session_id`, else
 * from the damaged copy.
 */
export async function endUnknownAgent(
  ctx: TeamsContext,
  team: TeamConfig,
  agent: UnknownAgent,
  reason: string,
): Promise<UnknownEnd> {
  const warnings: string[] = [];
  const found = await findMarkedPane(ctx, agent, warnings);
  const sessionId = found?.pane.sessionId ?? agent.sessionId ?? undefined;
  const now = isoNow(ctx.clock);
  const ended = await ctx.store.withAgentLock(team.name, agent.agentId, async () => {
    if ((await ctx.store.readAgent(team.name, agent.agentId)).kind === "ok") return undefined;
    const record = terminatedRecord(ctx, agent, { sessionId, hasPane: found !== undefined }, reason, now);
    await ctx.store.writeAgent(record);
    return record;
  });
  if (!ended) {
    return {
      ended: false,
      error: `Agent '${agent.agentId}' got a readable state file meanwhile; call kill-agent again to act on it`,
    };
  }
  if (sessionId)
    warnings.push(
      ...(await abortEndedSession(
        ctx,
        { teamName: team.name, agentId: agent.agentId, sessionId },
        { wasRunning: true },
      )),
    );
  else
    warnings.push(
      "Its OpenCode session is not known (no pane carries its mark, the damaged file does not name it)",
    );
  if (found) {
    const tmux = { session: teamSessionName(team.name), window: teamWindowName(team.name) };
    const owner = {
      agentId: agent.agentId,
      sessionId: sessionId ?? "",
      paneId: found.pane.paneId,
      attachPid: found.pane.panePid,
      tmux: found.socket === undefined ? tmux : { ...tmux, socket: found.socket },
    };
    warnings.push(...(await closeAgentPane(ctx, owner)));
  }
  const reassigned = await reassignTasksOf(
    ctx,
    team.name,
    [agent.agentId],
    `agent ${ended.name} ended: ${reason}`,
  );
  await releaseColor(ctx, agent.agentId);
  await recountActiveSessions(ctx).catch((error: unknown) => {
    warnings.push(`Could not update activeSessions: ${errorText(error)}`);
  });
  warnings.push(...(await agentEnded(ctx, ended, "interrupted", { reason })));
  return { ended: true, reassignedTasks: reassigned.get(agent.agentId) ?? [], warnings };
}

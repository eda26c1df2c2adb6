import { isoNow } from "../../clock.ts";
import type { MarkedPane } from "../../edges/tmux-api.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { agentEnded } from "../history/run-history.ts";
import { errorText } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { reassignTasksOf } from "../team/task.ts";
import { closeAgentPane, teamSessionName, teamWindowName } from "./agent-pane.ts";
import { releaseColor } from "./color-pool.ts";
import { abortEndedSession } from "./session-abort.ts";
import type { UnknownAgent } from "./unknown-agents.ts";

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

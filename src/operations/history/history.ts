import { isoNow } from "../../clock.ts";
import type { HistoryRead } from "../../state/history-store.ts";
import type { AgentHistory, AgentState, HistoryEntry, HistoryStatus } from "../../state/schemas.ts";
import type { UsageTotals } from "../../state/usage-schema.ts";
import type { TeamsContext } from "../context.ts";

/**
 * The team's agent history (specs/agent-history.md): every run of an agent, how it ended and what resumed it. Entries are written
 * by the lifecycle (spawn, completion, sweep, kill, resume), never by hand.
 */

const TASK_DESCRIPTION_LIMIT = 500;

function describeTask(prompt: string): string {
  const oneLine = prompt.replace(/\s+/g, " ").trim();
  return oneLine.length > TASK_DESCRIPTION_LIMIT
    ? `${oneLine.slice(0, TASK_DESCRIPTION_LIMIT - 1)}…`
    : oneLine;
}

/** specs/agent-history.md: drop the oldest completed/failed entry first, then the oldest interrupted entry that was resumed; never a spawned one. */
export function enforceMaxEntries(entries: HistoryEntry[], maxEntries: number): HistoryEntry[] {
  const kept = [...entries];
  while (kept.length > maxEntries) {
    const byAge = (a: HistoryEntry, b: HistoryEntry) => Date.parse(a.timestamp) - Date.parse(b.timestamp);
    const finished = kept.filter((e) => e.status === "completed" || e.status === "failed").sort(byAge);
    const resumed = kept.filter((e) => e.status === "resumed").sort(byAge);
    const victim = finished[0] ?? resumed[0];
    // Only running, interrupted-but-not-resumed and timed-out entries are left: they may still be resumed, so keep them.
    if (!victim) break;
    kept.splice(kept.indexOf(victim), 1);
  }
  return kept;
}

/** How a recorded outcome reads in the history (a confirmed graceful kill completed its run). */
export function outcomeStatus(outcome: AgentState["outcome"]): EndedHistoryStatus | undefined {
  return outcome === "killed" ? "completed" : outcome;
}

function historyStatusOf(agent: AgentState): HistoryStatus {
  const ended = outcomeStatus(agent.outcome);
  if (ended) return ended;
  if (agent.status === "inactive") return "interrupted";
  if (agent.status === "terminated") return "completed";
  return "spawned";
}

/** Recovery: rebuild a damaged history from what the agent files still say. */
export async function rebuildFromAgents(ctx: TeamsContext, teamName: string): Promise<HistoryEntry[]> {
  const { items } = await ctx.store.listAgentViews(teamName);
  const agents = items.map((view) => view.state).filter((agent) => agent.role !== "leader");
  const resumedBy = new Map(agents.filter((a) => a.resumes).map((a) => [a.resumes as string, a.agentId]));
  return agents.map((agent) => {
    const successor = resumedBy.get(agent.agentId);
    const status: HistoryStatus = successor ? "resumed" : historyStatusOf(agent);
    return {
      agent_id: agent.agentId,
      agent_type: agent.role,
      name: agent.name,
      task_description: describeTask(agent.prompt),
      timestamp: agent.createdAt,
      status,
      completion_timestamp: status === "spawned" ? null : (agent.terminatedAt ?? agent.updatedAt),
      ...(agent.resumes ? { resumes: agent.resumes } : {}),
      ...(successor ? { resumed_by: successor } : {}),
      ...(agent.usage ? { usage: agent.usage.totals } : {}),
      reason: "rebuilt from agent state after agent-history.json was damaged",
    };
  });
}

/**
 * Read the history; a missing file is an empty history, a damaged one is moved aside and rebuilt from the agent files
 * (see HistoryStore).
 */
export function readHistory(ctx: TeamsContext, teamName: string): Promise<HistoryRead> {
  const empty: AgentHistory = { version: 1, max_entries: ctx.options.historyMaxEntries, entries: [] };
  return ctx.store.history.read(teamName, empty, async () => ({
    ...empty,
    entries: enforceMaxEntries(await rebuildFromAgents(ctx, teamName), empty.max_entries),
  }));
}

/** Read-modify-write of the history under its lock; damage is repaired on the way. */
export function updateHistory(
  ctx: TeamsContext,
  teamName: string,
  change: (entries: HistoryEntry[]) => HistoryEntry[],
): Promise<string[]> {
  return ctx.store.history.update(teamName, async (current) => {
    const entries = current ? current.entries : await rebuildFromAgents(ctx, teamName);
    const maxEntries = ctx.options.historyMaxEntries;
    return { version: 1, max_entries: maxEntries, entries: enforceMaxEntries(change(entries), maxEntries) };
  });
}

export function recordSpawned(ctx: TeamsContext, agent: AgentState): Promise<string[]> {
  const entry: HistoryEntry = {
    agent_id: agent.agentId,
    agent_type: agent.role,
    name: agent.name,
    task_description: describeTask(agent.prompt),
    ...(agent.plan ? { plan: agent.plan } : {}),
    ...(agent.worktree ? { worktree: agent.worktree } : {}),
    timestamp: isoNow(ctx.clock),
    status: "spawned",
    completion_timestamp: null,
    ...(agent.resumes ? { resumes: agent.resumes } : {}),
  };
  return updateHistory(ctx, agent.teamName, (entries) => {
    // One entry per agent id (a resumed run gets a new id): an entry that exists already, e.g. rebuilt from the state
    // files by a concurrent write, is replaced.
    const withoutDuplicate = entries.filter((e) => e.agent_id !== agent.agentId);
    const linked = agent.resumes
      ? withoutDuplicate.map((e) =>
          e.agent_id === agent.resumes ? { ...e, status: "resumed" as const, resumed_by: agent.agentId } : e,
        )
      : withoutDuplicate;
    return [...linked, entry];
  });
}

export type EndedHistoryStatus = Exclude<HistoryStatus, "spawned" | "resumed">;

export interface RunEnd {
  agentId: string;
  status: EndedHistoryStatus;
  summary?: string;
  reason?: string;
  /** What the run spent, as counted when it ended. */
  usage?: UsageTotals;
}

/**
 * Runs that ended, in one history write however many there are (a sweep may end a thousand at once). Only an open
 * (spawned) entry changes: an outcome is recorded once.
 */
export function recordRunsEnded(
  ctx: TeamsContext,
  teamName: string,
  ends: readonly RunEnd[],
): Promise<string[]> {
  if (ends.length === 0) return Promise.resolve([]);
  const now = isoNow(ctx.clock);
  const byAgent = new Map(ends.map((end) => [end.agentId, end]));
  return updateHistory(ctx, teamName, (entries) =>
    entries.map((entry) => {
      const end = entry.status === "spawned" ? byAgent.get(entry.agent_id) : undefined;
      return end
        ? {
            ...entry,
            status: end.status,
            completion_timestamp: now,
            ...(end.summary ? { summary: end.summary } : {}),
            ...(end.reason ? { reason: end.reason } : {}),
            ...(end.usage ? { usage: end.usage } : {}),
          }
        : entry;
    }),
  );
}

/** One agent's run ended. */
export function recordEnded(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
  status: EndedHistoryStatus,
  details: { summary?: string; reason?: string; usage?: UsageTotals } = {},
): Promise<string[]> {
  return recordRunsEnded(ctx, teamName, [{ agentId, status, ...details }]);
}

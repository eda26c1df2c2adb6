import type { HistoryEntry, HistoryStatus } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import type { OpResult } from "../result.ts";
import { loadTeam, requireMember } from "../team/identity.ts";
import { readHistory } from "./history.ts";

export interface AgentHistoryInput {
  teamName: string;
  plan?: string;
  status?: HistoryStatus;
  limit?: number;
}

export interface AgentHistoryView {
  max_entries: number;
  total: number;
  entries: HistoryEntry[];
  /** Runs still going (status spawned). */
  active: HistoryEntry[];
  /** The most recent run that was interrupted (or timed out) and not resumed yet: what resume-agent would pick up. */
  interrupted: HistoryEntry | null;
  warnings?: string[];
}

const newestFirst = (a: HistoryEntry, b: HistoryEntry) => Date.parse(b.timestamp) - Date.parse(a.timestamp);

/** Answers three questions at once (specs/agent-history.md): what ran (filtered), what runs now, and what could be resumed. */
export function summarizeHistory(entries: HistoryEntry[], input: Omit<AgentHistoryInput, "teamName">) {
  const filtered = entries
    .filter(
      (e) =>
        (input.plan === undefined || e.plan === input.plan) &&
        (input.status === undefined || e.status === input.status),
    )
    .sort(newestFirst);
  const limited = input.limit === undefined ? filtered : filtered.slice(0, input.limit);
  const active = entries.filter((e) => e.status === "spawned").sort(newestFirst);
  const interrupted =
    entries
      .filter(
        (e) =>
          (e.status === "interrupted" || e.status === "timeout" || e.status === "budget") && !e.resumed_by,
      )
      .sort(newestFirst)[0] ?? null;
  return { total: filtered.length, entries: limited, active, interrupted };
}

export async function agentHistory(
  ctx: TeamsContext,
  input: AgentHistoryInput,
  sessionId: string,
): Promise<OpResult<AgentHistoryView>> {
  const team = await loadTeam(ctx, input.teamName);
  await requireMember(ctx, team, sessionId);
  const { history, warnings } = await readHistory(ctx, team.name);
  const view: AgentHistoryView = {
    max_entries: history.max_entries,
    ...summarizeHistory(history.entries, input),
  };
  return warnings.length > 0 ? { success: true, ...view, warnings } : { success: true, ...view };
}

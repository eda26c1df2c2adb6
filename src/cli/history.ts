import type { TeamsContext } from "../operations/context.ts";
import { readHistory } from "../operations/history/history.ts";
import { summarizeHistory } from "../operations/history/history-query.ts";
import type { HistoryEntry } from "../state/schemas.ts";
import { type Cell, localTime, type Painter, renderTable, renderWarnings, type Style } from "./format.ts";

const HISTORY_STYLE: Record<HistoryEntry["status"], Style> = {
  spawned: "green",
  completed: "blue",
  interrupted: "red",
  resumed: "cyan",
  failed: "magenta",
  timeout: "yellow",
  budget: "yellow",
};

export async function collectHistory(ctx: TeamsContext, teamName: string) {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind === "missing") throw new Error(`Team '${teamName}' does not exist`);
  const { history, warnings } = await readHistory(ctx, teamName);
  return {
    team: teamName,
    max_entries: history.max_entries,
    ...summarizeHistory(history.entries, {}),
    warnings,
  };
}

export function renderHistory(view: Awaited<ReturnType<typeof collectHistory>>, paint: Painter): string {
  if (view.entries.length === 0) return `No agent history in team '${view.team}' yet.`;
  const rows: Cell[][] = view.entries.map((e) => [
    { text: localTime(e.timestamp) },
    { text: e.name ?? e.agent_id.slice(0, 8) },
    { text: e.agent_type },
    { text: e.status, style: HISTORY_STYLE[e.status] },
    { text: localTime(e.completion_timestamp) },
    {
      text: e.resumes
        ? `resumes ${e.resumes.slice(0, 8)}`
        : e.resumed_by
          ? `resumed by ${e.resumed_by.slice(0, 8)}`
          : "-",
    },
    { text: e.task_description, max: 50 },
  ]);
  const table = renderTable(
    ["STARTED", "AGENT", "TYPE", "STATUS", "ENDED", "LINK", "TASK"],
    rows,
    paint,
    `opencode-teams history ${view.team} --json`,
  );
  return [table, ...renderWarnings(view.warnings, paint)].join("\n");
}

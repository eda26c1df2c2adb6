import { listUnknownAgents } from "../operations/agents/unknown-agents.ts";
import type { TeamsContext } from "../operations/context.ts";
import { waitingView } from "../operations/liveness/waiting.ts";
import { formatUsd } from "../operations/usage/totals.ts";
import { teamSpend } from "../operations/usage/usage-view.ts";
import { healthOf } from "../operations/views/list-agents.ts";
import type { UsageTotals } from "../state/usage-schema.ts";
import { shortId } from "./agent-ref.ts";
import {
  type Cell,
  formatAge,
  HEALTH_STYLE,
  localTime,
  type Painter,
  renderTable,
  renderWarnings,
  STATUS_STYLE,
} from "./format.ts";
import { terminalLine } from "./terminal-text.ts";

export interface StatusRow {
  team: string;
  name: string;
  agentId: string;
  role: string;
  status: string;
  health: string;
  heartbeatAgeS: number | null;
  model: string;
  /** Only while the agent runs: an ended agent's pane is closed (or no longer its own). */
  paneId: string | null;
  tasks: string[];
  /** Messages and notices in its inbox that no read-messages returned yet. */
  unread: number;
  /** What the agent waits on, e.g. `permission: bash (git push)`; null when nothing. */
  waiting: string | null;
  /** Why its model cannot work, e.g. `auth: APIError (HTTP 401): ...`; null when it works. */
  failing: string | null;
  /** Its run's tokens (every kind) and cost in USD, as counted from the event stream; null before its first turn. */
  tokens: number | null;
  costUsd: number | null;
}

function waitingText(state: Parameters<typeof waitingView>[0]): string | null {
  const waiting = waitingView(state);
  if (!waiting) return null;
  // The id is what approve/deny --request names.
  return `${waiting.kind} ${waiting.requestId}: ${waiting.title}${waiting.pattern ? ` (${waiting.pattern})` : ""}`;
}

export interface StatusReport {
  generatedAt: string;
  teams: string[];
  agents: StatusRow[];
  /** Per team: every run of its agents summed (ended ones too), the leader's session apart. */
  totals: { team: string; agents: UsageTotals; leader: UsageTotals | null }[];
  warnings: string[];
}

const ENDED = new Set(["terminated", "inactive"]);

/** Read straight from the state files (no server round trips), so `watch` stays cheap and works with the server down. */
export async function collectStatus(
  ctx: TeamsContext,
  teamName: string | undefined,
  includeTerminated: boolean,
): Promise<StatusReport> {
  const teams = teamName ? [teamName] : await ctx.store.listTeamNames();
  const now = ctx.clock.now();
  const agents: StatusRow[] = [];
  const totals: StatusReport["totals"] = [];
  const warnings: string[] = [];
  for (const team of teams) {
    const config = await ctx.store.readTeam(team);
    if (config.kind === "missing") throw new Error(`Team '${team}' does not exist`);
    const listed = await ctx.store.listAgentViews(team);
    warnings.push(...listed.warnings);
    const spend = teamSpend(listed.items.map((view) => view.state));
    totals.push({ team, agents: spend.agents.totals, leader: spend.leader?.totals ?? null });
    const board = await ctx.store.readTasks(team);
    const tasks = board.kind === "ok" ? board.value.tasks : [];
    const held = (agentId: string) =>
      tasks.filter((t) => t.assignee === agentId && t.status === "in_progress").map((t) => t.id);
    // The pending ones and those in the session not read: one listing each, nothing read but the pending.
    const unreadOf = async (agentId: string) =>
      (await ctx.store.readInboxFiles(team, await ctx.store.inboxFiles(team, agentId))).items.filter(
        (m) => !m.readAt,
      ).length + (await ctx.store.inboxFilesIn(team, agentId, "delivered")).length;
    for (const view of listed.items) {
      const { state } = view;
      if (state.status === "terminated" && !includeTerminated) continue;
      agents.push({
        team,
        name: state.name,
        agentId: state.agentId,
        role: state.role,
        status: state.status,
        health: healthOf(view, now, ctx.options.staleThresholdMs),
        heartbeatAgeS: Math.max(0, Math.round((now - Date.parse(view.heartbeatTs)) / 1000)),
        model: state.model,
        paneId: ENDED.has(state.status) ? null : (state.paneId ?? null),
        tasks: held(state.agentId),
        waiting: waitingText(state),
        failing: state.failing ? `${state.failing.kind}: ${state.failing.error}` : null,
        unread: await unreadOf(state.agentId),
        tokens: state.usage?.totals.total ?? null,
        costUsd: state.usage?.totals.costUsd ?? null,
      });
    }
    // Agents whose state file is damaged: shown on every run, with what their traces tell.
    const traced = await listUnknownAgents(ctx, team);
    warnings.push(...traced.skipped);
    for (const agent of traced.agents) {
      warnings.push(agent.warning);
      agents.push({
        team,
        name: agent.name ?? "?",
        agentId: agent.agentId,
        role: agent.role ?? "?",
        status: agent.status,
        health: "error",
        heartbeatAgeS: agent.heartbeatTs
          ? Math.max(0, Math.round((now - Date.parse(agent.heartbeatTs)) / 1000))
          : null,
        model: agent.model ?? "?",
        paneId: agent.paneId,
        tasks: held(agent.agentId),
        waiting: null,
        failing: null,
        unread: await unreadOf(agent.agentId),
        tokens: null,
        costUsd: null,
      });
    }
  }
  return { generatedAt: new Date(now).toISOString(), teams, agents, totals, warnings };
}

export function renderStatus(report: StatusReport, paint: Painter): string {
  if (report.teams.length === 0) return "No teams yet. A leader creates one with the create-team tool.";
  const rows: Cell[][] = report.agents.map((row) => [
    { text: row.team },
    { text: row.name },
    { text: shortId(row.agentId) },
    { text: row.role },
    { text: row.status, style: STATUS_STYLE[row.status] },
    { text: row.health, style: HEALTH_STYLE[row.health] },
    { text: formatAge(row.heartbeatAgeS) },
    { text: row.model },
    { text: row.paneId ?? "-" },
    { text: row.tasks.join(",") || "-" },
    { text: row.waiting ?? "-", max: 60, ...(row.waiting ? { style: "yellow" as const } : {}) },
    { text: row.unread > 0 ? String(row.unread) : "-", style: row.unread > 0 ? "yellow" : undefined },
    { text: row.tokens === null ? "-" : String(row.tokens) },
    { text: row.costUsd === null ? "-" : formatUsd(row.costUsd) },
  ]);
  const table = renderTable(
    [
      "TEAM",
      "NAME",
      "ID",
      "ROLE",
      "STATUS",
      "HEALTH",
      "HEARTBEAT",
      "MODEL",
      "PANE",
      "TASK",
      "WAITING",
      "UNREAD",
      "TOKENS",
      "COST",
    ],
    rows,
    paint,
    `opencode-teams status ${report.teams.length === 1 ? `${report.teams[0]} ` : ""}--json`,
  );
  const failing = report.agents.flatMap((row) =>
    row.failing
      ? [paint(terminalLine(`${row.name} (${row.agentId}): model failing, ${row.failing}`, 300), "magenta")]
      : [],
  );
  return [table, ...failing, ...report.totals.map(totalLine), ...renderWarnings(report.warnings, paint)].join(
    "\n",
  );
}

/** One line per team under the table: its agents' usage (every run, ended ones too), the leader's apart. */
function totalLine({ team, agents, leader }: StatusReport["totals"][number]): string {
  const own = leader ? `; leader ${leader.total} tokens, ${formatUsd(leader.costUsd)}` : "";
  return `team ${team} total: ${agents.total} tokens, ${formatUsd(agents.costUsd)}${own} (opencode-teams usage ${team})`;
}

/** The header line of one `watch` frame. */
export function watchHeader(report: StatusReport): string {
  return `opencode-teams watch  ${localTime(report.generatedAt)}  (Ctrl-C to stop)`;
}

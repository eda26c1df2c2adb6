import type { TeamsContext } from "../operations/context.ts";
import type { TeamLimits } from "../operations/usage/limits.ts";
import { formatBudget, formatUsd } from "../operations/usage/totals.ts";
import { teamSpend } from "../operations/usage/usage-view.ts";
import type { Budget, UsageTotals } from "../state/usage-schema.ts";
import { shortId } from "./agent-ref.ts";
import { type OptionValues, UsageError } from "./command.ts";
import { type Cell, type Painter, renderTable, renderWarnings } from "./format.ts";

export interface UsageAgentRow {
  name: string;
  agentId: string;
  role: string;
  status: string;
  model: string;
  totals: UsageTotals | null;
  budget: Budget | null;
}

export interface TeamUsageReport {
  team: string;
  agents: UsageAgentRow[];
  /** Every run of the team's agents summed, per model; the leader's own session apart. */
  byModel: Record<string, UsageTotals>;
  total: UsageTotals;
  leader: UsageTotals | null;
  budget: Budget | null;
  maxAgents: number;
}

export interface UsageReport {
  teams: TeamUsageReport[];
  warnings: string[];
}

/** From the state files only, as `status`: the usage the plugin counted from the event stream. */
export async function collectUsage(ctx: TeamsContext, teamName: string | undefined): Promise<UsageReport> {
  const names = teamName ? [teamName] : await ctx.store.listTeamNames();
  const teams: TeamUsageReport[] = [];
  const warnings: string[] = [];
  for (const team of names) {
    const config = await ctx.store.readTeam(team);
    if (config.kind === "missing") throw new Error(`Team '${team}' does not exist`);
    const listed = await ctx.store.listAgentViews(team);
    warnings.push(...listed.warnings);
    const states = listed.items.map((view) => view.state);
    const spend = teamSpend(states);
    teams.push({
      team,
      agents: states.map((state) => ({
        name: state.name,
        agentId: state.agentId,
        role: state.role,
        status: state.status,
        model: state.model,
        totals: state.usage?.totals ?? null,
        budget: state.budget ?? null,
      })),
      byModel: spend.agents.byModel,
      total: spend.agents.totals,
      leader: spend.leader?.totals ?? null,
      budget: config.kind === "ok" ? (config.value.budget ?? null) : null,
      maxAgents: (config.kind === "ok" ? config.value.maxAgents : undefined) ?? ctx.options.maxAgents,
    });
  }
  return { teams, warnings };
}

function cells(label: Cell[], totals: UsageTotals | null): Cell[] {
  const n = (value: number | undefined) => ({ text: value === undefined ? "-" : String(value) });
  return [
    ...label,
    n(totals?.input),
    n(totals?.output),
    n(totals?.reasoning),
    n(totals === null ? undefined : totals.cacheRead + totals.cacheWrite),
    n(totals?.total),
    { text: totals ? formatUsd(totals.costUsd) : "-" },
    n(totals?.turns),
  ];
}

const NUMBERS = ["INPUT", "OUTPUT", "REASONING", "CACHE", "TOTAL", "COST", "TURNS"];

function renderTeam(report: TeamUsageReport, paint: Painter): string {
  const agents = renderTable(
    ["NAME", "ID", "ROLE", "STATUS", "BUDGET", ...NUMBERS],
    report.agents.map((row) =>
      cells(
        [
          { text: row.name },
          { text: shortId(row.agentId) },
          { text: row.role },
          { text: row.status },
          { text: row.budget ? formatBudget(row.budget) : "-" },
        ],
        row.totals,
      ),
    ),
    paint,
  );
  const models = renderTable(
    ["MODEL", ...NUMBERS],
    Object.entries(report.byModel).map(([model, totals]) => cells([{ text: model }], totals)),
    paint,
  );
  const budget = report.budget ? `, budget ${formatBudget(report.budget)}` : ", no budget";
  const leader = report.leader
    ? `; leader (apart) ${report.leader.total} tokens, ${formatUsd(report.leader.costUsd)}`
    : "";
  return [
    paint(`team ${report.team}`, "bold"),
    agents,
    "",
    models,
    `team total: ${report.total.total} tokens, ${formatUsd(report.total.costUsd)} in ${report.total.turns} turns${budget}, maxAgents ${report.maxAgents}${leader}`,
  ].join("\n");
}

export function renderUsage(report: UsageReport, paint: Painter): string {
  if (report.teams.length === 0) return "No teams yet. A leader creates one with the create-team tool.";
  return [
    ...report.teams.map((team) => renderTeam(team, paint)),
    ...renderWarnings(report.warnings, paint),
  ].join("\n\n");
}

/** A number option as a person typed it: digits (and a decimal point), nothing else. */
function numberOption(raw: string | boolean | undefined, name: string): number | undefined {
  if (raw === undefined || typeof raw === "boolean") return undefined;
  if (!/^\d+(\.\d+)?$/.test(raw.trim()))
    throw new UsageError(`--${name} must be a positive number, not '${raw}'`);
  return Number(raw);
}

/** The limits `usage` was asked to set, or undefined when it only shows. */
export function limitsFromOptions(values: OptionValues): TeamLimits | undefined {
  const usd = numberOption(values["budget-usd"], "budget-usd");
  const tokens = numberOption(values["budget-tokens"], "budget-tokens");
  const maxAgents = numberOption(values["max-agents"], "max-agents");
  if (usd === undefined && tokens === undefined && maxAgents === undefined) return undefined;
  const budget = { ...(usd !== undefined ? { usd } : {}), ...(tokens !== undefined ? { tokens } : {}) };
  return {
    ...(usd !== undefined || tokens !== undefined ? { budget } : {}),
    ...(maxAgents !== undefined ? { maxAgents } : {}),
  };
}

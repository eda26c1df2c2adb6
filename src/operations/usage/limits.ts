import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { BUDGET_TOKENS_MAX, BUDGET_USD_MAX, type Budget } from "../../state/usage-schema.ts";
import type { TeamsContext } from "../context.ts";
import { isRunning } from "../liveness/heartbeat.ts";
import { CallerError } from "../result.ts";
import { budgetFraction, formatBudget, formatSpend } from "./totals.ts";
import { teamSpend } from "./usage-view.ts";

// The limits a caller sets (budgets, maxAgents), checked at the boundary, and the refusals they cause.

export const MAX_AGENTS_LIMIT = 1000;

/** A caller's budget, or a CallerError saying what is wrong with it; nothing is written before this passes. */
export function budgetInput(
  value: { usd?: number; tokens?: number } | undefined,
  what: string,
): Budget | undefined {
  if (value === undefined) return undefined;
  const { usd, tokens } = value;
  if (usd === undefined && tokens === undefined)
    throw new CallerError(
      `${what} needs usd, tokens or both, e.g. { "usd": 2 } or { "tokens": 500000 }; leave it out for no limit`,
    );
  if (usd !== undefined && !(Number.isFinite(usd) && usd > 0 && usd <= BUDGET_USD_MAX))
    throw new CallerError(
      `${what}.usd must be a number of dollars above 0 and at most ${BUDGET_USD_MAX}, got ${usd}`,
    );
  if (tokens !== undefined && !(Number.isInteger(tokens) && tokens > 0 && tokens <= BUDGET_TOKENS_MAX))
    throw new CallerError(
      `${what}.tokens must be a whole number above 0 and at most ${BUDGET_TOKENS_MAX}, got ${tokens}`,
    );
  return { ...(usd !== undefined ? { usd } : {}), ...(tokens !== undefined ? { tokens } : {}) };
}

export function maxAgentsInput(value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!(Number.isInteger(value) && value > 0 && value <= MAX_AGENTS_LIMIT))
    throw new CallerError(`maxAgents must be a whole number from 1 to ${MAX_AGENTS_LIMIT}, got ${value}`);
  return value;
}

/** Why the team's budget leaves nothing for another agent (spawn or resume), or undefined when some is left. */
export async function teamBudgetRefusal(ctx: TeamsContext, team: TeamConfig): Promise<string | undefined> {
  if (!team.budget) return undefined;
  const { items } = await ctx.store.listAgentViews(team.name);
  const spent = teamSpend(items.map((view) => view.state)).agents.totals;
  if (budgetFraction(spent, team.budget) < 1) return undefined;
  return `Team '${team.name}' has spent ${formatSpend(spent)} of its budget of ${formatBudget(team.budget)}: nothing is left for another agent. Ask the user to raise it (opencode-teams usage ${team.name} --budget-usd <dollars> or --budget-tokens <n>), or finish the work yourself.`;
}

/** The check cannot tell without the team's agent files (see `memberCapacity`). */
export const UNCOUNTED = Symbol("uncounted");

/**
 * A check of the team's config under its lock, when a launch reserves the new member: undefined when there is room,
 * else why the launch is refused, or UNCOUNTED when the agent files must be read to tell.
 */
export type CapacityCheck = (current: TeamConfig) => string | typeof UNCOUNTED | undefined;

function agentLimit(ctx: TeamsContext, team: TeamConfig): number {
  return team.maxAgents ?? ctx.options.maxAgents;
}

/**
 * The check without reading an agent file: a team with fewer members than its limit (every agent reserved, running
 * or ended, the leader aside) cannot be running that many. Most launches need no more, and their way to the prompt
 * reads no agent file (those reads took 10-20 ms in a busy leader process); at the limit of members it is UNCOUNTED.
 */
export function memberCapacity(ctx: TeamsContext): CapacityCheck {
  return (current) =>
    current.members.filter((m) => m.role !== "leader").length < agentLimit(ctx, current)
      ? undefined
      : UNCOUNTED;
}

/**
 * The full check: refused while `max` agents run. `running` is what the agent files said just before; members added
 * since (launches in flight, which have no file yet or were not read) count too, so two spawns racing for the last
 * place cannot both take it.
 */
export async function capacityCheck(
  ctx: TeamsContext,
  teamName: string,
): Promise<(current: TeamConfig) => string | undefined> {
  const { items } = await ctx.store.listAgentViews(teamName);
  const known = new Set(items.map((view) => view.state.agentId));
  const running: AgentState[] = items
    .map((view) => view.state)
    .filter((state) => state.role !== "leader" && isRunning(state.status));
  return (current) => {
    const max = agentLimit(ctx, current);
    const inFlight = current.members.filter((m) => m.role !== "leader" && !known.has(m.agentId));
    const names = [...running.map((state) => state.name), ...inFlight.map((m) => `${m.name} (starting)`)];
    if (names.length < max) return undefined;
    const limit = current.maxAgents !== undefined ? "the team's maxAgents" : "the plugin option maxAgents";
    return `Team '${current.name}' already runs ${names.length} agent${names.length === 1 ? "" : "s"}, the limit (${max}, ${limit}): ${names.join(", ")}. Wait for one to finish, end one (complete-agent, kill-agent), or ask the user to raise the limit (opencode-teams usage ${current.name} --max-agents <n>).`;
  };
}

export interface TeamLimits {
  budget?: { usd?: number; tokens?: number };
  maxAgents?: number;
}

/**
 * Change a team's budget (the given parts; the other is kept) or maxAgents: a person's decision (the CLI), never the
 * model's. A changed budget is told about afresh at 80% and 100%; agents it stopped stay stopped until resumed.
 */
export async function setTeamLimits(
  ctx: TeamsContext,
  teamName: string,
  limits: TeamLimits,
): Promise<TeamConfig> {
  const maxAgents = maxAgentsInput(limits.maxAgents);
  const given = budgetInput(limits.budget, "budget");
  let updated: TeamConfig | undefined;
  await ctx.store.updateTeam(teamName, (current) => {
    if (!current) return undefined;
    const merged = given ? { ...current.budget, ...given } : current.budget;
    const { budgetNotice, ...rest } = current;
    updated = {
      ...rest,
      ...(merged ? { budget: merged } : {}),
      ...(given || !budgetNotice ? {} : { budgetNotice }),
      ...(maxAgents !== undefined ? { maxAgents } : {}),
    };
    return updated;
  });
  if (!updated) throw new CallerError(`Team '${teamName}' does not exist`);
  return updated;
}

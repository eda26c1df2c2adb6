import type { AgentState } from "../../state/schemas.ts";
import type { Budget, UsageTotals } from "../../state/usage-schema.ts";
import { addSums, budgetFraction, type UsageSums, zeroTotals } from "./totals.ts";

/** Usage as every listing shows it (get-agent-status `usage`, list-agents `metrics`, summaries, the CLI's --json). */
export interface UsageKeys {
  tokens_input: number | null;
  tokens_output: number | null;
  tokens_reasoning: number | null;
  tokens_cache_read: number | null;
  tokens_cache_write: number | null;
  tokens_total: number | null;
  cost_usd: number | null;
  turns: number | null;
}

export interface AgentUsageView extends UsageKeys {
  budget: Budget | null;
  /** The larger of the budget's two fractions used (1 = reached); null without a budget. */
  budget_used: number | null;
  /** When the usage was last counted; null before the first assistant message. */
  counted_at: string | null;
}

export interface TeamUsageView {
  /** The team's agents (every run, ended ones too), the leader not included. */
  agents: UsageKeys;
  /** The leader's own session, kept apart: it is the user's, and no team budget covers it. */
  leader: UsageKeys | null;
  budget: Budget | null;
  budget_used: number | null;
}

const UNKNOWN: UsageKeys = {
  tokens_input: null,
  tokens_output: null,
  tokens_reasoning: null,
  tokens_cache_read: null,
  tokens_cache_write: null,
  tokens_total: null,
  cost_usd: null,
  turns: null,
};

export function usageKeys(totals: UsageTotals | undefined): UsageKeys {
  if (!totals) return { ...UNKNOWN };
  return {
    tokens_input: totals.input,
    tokens_output: totals.output,
    tokens_reasoning: totals.reasoning,
    tokens_cache_read: totals.cacheRead,
    tokens_cache_write: totals.cacheWrite,
    tokens_total: totals.total,
    cost_usd: totals.costUsd,
    turns: totals.turns,
  };
}

function fraction(totals: UsageTotals, budget: Budget | undefined): number | null {
  return budget ? Math.round(budgetFraction(totals, budget) * 1000) / 1000 : null;
}

export function agentUsageView(state: AgentState): AgentUsageView {
  return {
    ...usageKeys(state.usage?.totals),
    budget: state.budget ?? null,
    budget_used: fraction(state.usage?.totals ?? zeroTotals(), state.budget),
    counted_at: state.usage?.countedAt ?? null,
  };
}

const NONE: UsageSums = { totals: zeroTotals(), byModel: {} };

/** What the team's agents spent (each run once; a resumed run counts only what it added), the leader apart. */
export function teamSpend(states: readonly AgentState[]): {
  agents: UsageSums;
  leader: UsageSums | undefined;
} {
  let agents = NONE;
  let leader: UsageSums | undefined;
  for (const state of states) {
    if (!state.usage) continue;
    if (state.role === "leader") leader = leader ? addSums(leader, state.usage) : state.usage;
    else agents = addSums(agents, state.usage);
  }
  return { agents, leader };
}

export function teamUsageView(states: readonly AgentState[], budget: Budget | undefined): TeamUsageView {
  const spend = teamSpend(states);
  return {
    agents: usageKeys(spend.agents.totals),
    leader: spend.leader ? usageKeys(spend.leader.totals) : null,
    budget: budget ?? null,
    budget_used: fraction(spend.agents.totals, budget),
  };
}

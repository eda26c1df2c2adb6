import type { AgentState } from "../../state/schemas.ts";
import type { AgentUsage, Budget } from "../../state/usage-schema.ts";
import { agentLabel } from "../agents/agent-words.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError } from "../result.ts";
import { countedUsage } from "./counted.ts";
import { addSums, formatBudget, formatSpend, zeroTotals } from "./totals.ts";

/** The agent file's state with its usage as last counted (the heartbeat slot holds it). */
export async function withCountedUsage(ctx: TeamsContext, agent: AgentState): Promise<AgentState> {
  const usage = await countedUsage(ctx, agent);
  return usage ? { ...agent, usage } : agent;
}

/**
 * The continued run's budget: the new one, else the old run's afresh (a resumed run's usage starts from zero, as its
 * time limit does). An agent its budget stopped is not silently given the same amount again: the leader says how much.
 */
export function resumedBudget(old: AgentState, budget: Budget | undefined): Budget | undefined {
  if (budget) return budget;
  if (old.outcome === "budget") {
    const spent = old.usage ? ` after spending ${formatSpend(old.usage.totals)}` : "";
    const was = old.budget ? ` of ${formatBudget(old.budget)}` : "";
    throw new CallerError(
      `${agentLabel(old)} was stopped by its budget${was}${spent}. Resume it with a new budget for the continued run, e.g. budget { "usd": 1 } or { "tokens": 200000 }.`,
    );
  }
  return old.budget;
}

/** What the session had spent when the old run ended: the successor's usage counts from there. */
export function usageBaseOf(old: AgentState): { usageBase: AgentUsage } | Record<string, never> {
  if (!old.usage && !old.usageBase) return {};
  const empty = { totals: zeroTotals(), byModel: {} };
  const sums = addSums(old.usageBase ?? empty, old.usage ?? empty);
  return {
    usageBase: { ...sums, countedAt: old.usage?.countedAt ?? old.usageBase?.countedAt ?? old.updatedAt },
  };
}

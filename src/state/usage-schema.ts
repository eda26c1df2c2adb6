import { z } from "zod";

// What an agent spent (tokens and USD, as OpenCode prices each assistant message) and the limits it may spend to.
// Kept in the agent's and the team's own files (schemas.ts), so a listing reads them without asking the server.

const count = z.number().int().min(0);

/** Tokens by kind, their sum, the cost in USD and the number of assistant messages (turn steps) they came from. */
export const UsageTotalsSchema = z.object({
  input: count,
  output: count,
  reasoning: count,
  cacheRead: count,
  cacheWrite: count,
  /** input + output + reasoning + cacheRead + cacheWrite: what a `tokens` budget counts. */
  total: count,
  costUsd: z.number().min(0),
  /** Assistant messages counted: one per model call of a turn. */
  turns: count,
});
export type UsageTotals = z.infer<typeof UsageTotalsSchema>;

/** An agent's usage: its totals, the same per model, and when they were last counted. */
export const AgentUsageSchema = z.object({
  totals: UsageTotalsSchema,
  /** Keyed `provider/model` as the server reports the model that answered. */
  byModel: z.record(z.string(), UsageTotalsSchema),
  countedAt: z.string().datetime({ offset: true }),
});
export type AgentUsage = z.infer<typeof AgentUsageSchema>;

export function sameTotals(a: UsageTotals, b: UsageTotals): boolean {
  return (
    a.input === b.input &&
    a.output === b.output &&
    a.reasoning === b.reasoning &&
    a.cacheRead === b.cacheRead &&
    a.cacheWrite === b.cacheWrite &&
    a.total === b.total &&
    a.costUsd === b.costUsd &&
    a.turns === b.turns
  );
}

/**
 * An agent's usage as its heartbeat slot holds it: as AgentUsage, except that a count from one model only (an agent
 * runs on one model, mostly) names that model in `model` instead of repeating its totals under `byModel`, which is a
 * third of the slot's record and of what every write and read of it checks. Slots with `byModel` read as before.
 */
export const SlotUsageSchema = z
  .object({
    totals: UsageTotalsSchema,
    byModel: z.record(z.string(), UsageTotalsSchema).optional(),
    model: z.string().optional(),
    countedAt: z.string().datetime({ offset: true }),
  })
  .refine((usage) => (usage.byModel === undefined) !== (usage.model === undefined), {
    message: "a slot's usage names its models in byModel or in model, one of the two",
  });
export type SlotUsage = z.infer<typeof SlotUsageSchema>;

/** `usage` as a slot holds it (see SlotUsageSchema). */
export function slotUsage(usage: AgentUsage): SlotUsage {
  const models = Object.keys(usage.byModel);
  const only = models.length === 1 ? models[0] : undefined;
  const totals = only === undefined ? undefined : usage.byModel[only];
  if (only === undefined || !totals || !sameTotals(totals, usage.totals)) return usage;
  return { totals: usage.totals, model: only, countedAt: usage.countedAt };
}

/** A slot's usage as the agent's (see SlotUsageSchema): one model's totals are its `totals`. */
export function agentUsage(usage: SlotUsage): AgentUsage {
  const { totals, byModel, model, countedAt } = usage;
  return { totals, byModel: byModel ?? (model === undefined ? {} : { [model]: totals }), countedAt };
}

/** Largest budget accepted: anything above is a typo (or a way to say "no budget", which is to give none). */
export const BUDGET_USD_MAX = 100_000;
export const BUDGET_TOKENS_MAX = 10_000_000_000;

/** A spending limit; at least one of the two. Checked at the boundary (operations/usage/budget-input.ts). */
export const BudgetSchema = z
  .object({
    usd: z.number().positive().max(BUDGET_USD_MAX).optional(),
    tokens: z.number().int().positive().max(BUDGET_TOKENS_MAX).optional(),
  })
  .refine((budget) => budget.usd !== undefined || budget.tokens !== undefined, {
    message: "a budget needs usd, tokens or both",
  });
export type Budget = z.infer<typeof BudgetSchema>;

/** How far a budget has been told about: once at 80% (`warned`), once at 100% (`reached`). */
export const BudgetNoticeSchema = z.object({
  warnedAt: z.string().datetime({ offset: true }).optional(),
  reachedAt: z.string().datetime({ offset: true }).optional(),
  /** The leader was told that a USD budget cannot be reached: the model reports tokens but no price. */
  unpricedAt: z.string().datetime({ offset: true }).optional(),
});
export type BudgetNotice = z.infer<typeof BudgetNoticeSchema>;

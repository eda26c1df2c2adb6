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

import type { MessageUsage } from "../../edges/opencode-api.ts";
import { type AgentUsage, type Budget, sameTotals, type UsageTotals } from "../../state/usage-schema.ts";

// Sums of usage, and how they read: the arithmetic every other usage module shares.

export function zeroTotals(): UsageTotals {
  return { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, total: 0, costUsd: 0, turns: 0 };
}

/** USD rounded to a millionth of a cent: sums of float prices must not drift in the last digits. */
function usd(value: number): number {
  return Math.round(value * 1e8) / 1e8;
}

function totalsOfMessage(message: MessageUsage): UsageTotals {
  const { input, output, reasoning, cacheRead, cacheWrite } = message;
  return {
    input,
    output,
    reasoning,
    cacheRead,
    cacheWrite,
    total: input + output + reasoning + cacheRead + cacheWrite,
    costUsd: message.cost,
    turns: 1,
  };
}

export function addTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    reasoning: a.reasoning + b.reasoning,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    total: a.total + b.total,
    costUsd: usd(a.costUsd + b.costUsd),
    turns: a.turns + b.turns,
  };
}

/** `a` less `b`, never below zero (a message the server removed since `b` was taken). */
function subtractTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  const less = (x: number, y: number) => Math.max(0, x - y);
  return {
    input: less(a.input, b.input),
    output: less(a.output, b.output),
    reasoning: less(a.reasoning, b.reasoning),
    cacheRead: less(a.cacheRead, b.cacheRead),
    cacheWrite: less(a.cacheWrite, b.cacheWrite),
    total: less(a.total, b.total),
    costUsd: usd(less(a.costUsd, b.costUsd)),
    turns: less(a.turns, b.turns),
  };
}

export type UsageSums = Pick<AgentUsage, "totals" | "byModel">;

/** A session's usage from its assistant messages, each counted once. */
export function sumMessages(messages: Iterable<MessageUsage>): UsageSums {
  let totals = zeroTotals();
  const byModel: Record<string, UsageTotals> = {};
  for (const message of messages) {
    const one = totalsOfMessage(message);
    totals = addTotals(totals, one);
    byModel[message.model] = addTotals(byModel[message.model] ?? zeroTotals(), one);
  }
  return { totals, byModel };
}

/**
 * `sums` with one more message counted, in a new object: the same additions, in the same order, as sumMessages makes
 * for that message after the others (a session's sums kept as its messages come, see session-count.ts).
 */
export function withMessage(sums: UsageSums, message: MessageUsage): UsageSums {
  const one = totalsOfMessage(message);
  return {
    totals: addTotals(sums.totals, one),
    byModel: {
      ...sums.byModel,
      [message.model]: addTotals(sums.byModel[message.model] ?? zeroTotals(), one),
    },
  };
}

export function addSums(a: UsageSums, b: UsageSums): UsageSums {
  const byModel: Record<string, UsageTotals> = { ...a.byModel };
  for (const [model, totals] of Object.entries(b.byModel))
    byModel[model] = addTotals(byModel[model] ?? zeroTotals(), totals);
  return { totals: addTotals(a.totals, b.totals), byModel };
}

/** A run's share of its session's usage: what the session spent less what it had spent when the run began. */
export function runShare(session: UsageSums, base: UsageSums | undefined): UsageSums {
  if (!base) return session;
  const byModel: Record<string, UsageTotals> = {};
  for (const [model, totals] of Object.entries(session.byModel)) {
    const left = subtractTotals(totals, base.byModel[model] ?? zeroTotals());
    if (left.turns > 0 || left.total > 0) byModel[model] = left;
  }
  return { totals: subtractTotals(session.totals, base.totals), byModel };
}

/**
 * Whether two counts say the same: totals and per-model totals alike (a counted usage's `countedAt` aside, which says
 * when, not what).
 */
export function sameSums(a: UsageSums | undefined, b: UsageSums): boolean {
  if (a === undefined || !sameTotals(a.totals, b.totals)) return false;
  const models = Object.keys(a.byModel);
  if (models.length !== Object.keys(b.byModel).length) return false;
  return models.every(
    (model) =>
      Object.hasOwn(b.byModel, model) &&
      sameTotals(a.byModel[model] as UsageTotals, b.byModel[model] as UsageTotals),
  );
}

/** The larger of the two fractions of a budget that `totals` has used (0 with no budget). */
export function budgetFraction(totals: UsageTotals, budget: Budget | undefined): number {
  if (!budget) return 0;
  const byUsd = budget.usd !== undefined ? totals.costUsd / budget.usd : 0;
  const byTokens = budget.tokens !== undefined ? totals.total / budget.tokens : 0;
  // Rounded: $0.08 of $0.10 is 80%, not the 79.999...% of float division, and $0.10 of $0.10 is reached.
  return Math.round(Math.max(byUsd, byTokens) * 1e9) / 1e9;
}

/** Whole cents with two decimals ($0.10, $12.00); a fraction of a cent with four ($0.0123). */
export function formatUsd(value: number): string {
  const wholeCents = Math.abs(value * 100 - Math.round(value * 100)) < 1e-6;
  return `$${value.toFixed(wholeCents || value >= 1 ? 2 : 4)}`;
}

export function formatBudget(budget: Budget): string {
  return [
    ...(budget.usd !== undefined ? [formatUsd(budget.usd)] : []),
    ...(budget.tokens !== undefined ? [`${budget.tokens} tokens`] : []),
  ].join(" / ");
}

/** "$0.0200, 45 tokens in 3 turns": what the leader is told of an agent's spend. */
export function formatSpend(totals: UsageTotals): string {
  return `${formatUsd(totals.costUsd)}, ${totals.total} tokens in ${totals.turns} turn${totals.turns === 1 ? "" : "s"}`;
}

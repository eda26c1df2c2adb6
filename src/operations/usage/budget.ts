import { isoNow } from "../../clock.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { BudgetNotice } from "../../state/usage-schema.ts";
import { agentLabel } from "../agents/agent-words.ts";
import { finishAgent } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { isRunning } from "../liveness/heartbeat.ts";
import { deliverInboxMessage } from "../messages/delivery.ts";
import { notifyLeader, SYSTEM_SENDER } from "../messages/notify.ts";
import { errorText } from "../result.ts";
import { countedUsage } from "./counted.ts";
import { budgetFraction, formatBudget, formatSpend } from "./totals.ts";
import { teamSpend } from "./usage-view.ts";

/** The share of a budget at which the leader is told and the agent is asked to wrap up. */
export const BUDGET_WARN_AT = 0.8;

type Stage = keyof BudgetNotice;

/** Mark `stage` on the agent under its lock; the record when this call marked it (told once, across processes). */
async function claimAgentStage(ctx: TeamsContext, agent: AgentState, stage: Stage) {
  let claimed: AgentState | undefined;
  await ctx.store.updateAgent(agent.teamName, agent.agentId, (current) => {
    if (!current || current.budgetNotice?.[stage] || !isRunning(current.status)) return undefined;
    claimed = { ...current, budgetNotice: { ...current.budgetNotice, [stage]: isoNow(ctx.clock) } };
    return claimed;
  });
  return claimed;
}

async function claimTeamStage(ctx: TeamsContext, teamName: string, stage: Stage) {
  let claimed: TeamConfig | undefined;
  await ctx.store.updateTeam(teamName, (current) => {
    if (!current || current.budgetNotice?.[stage]) return undefined;
    claimed = { ...current, budgetNotice: { ...current.budgetNotice, [stage]: isoNow(ctx.clock) } };
    return claimed;
  });
  return claimed;
}

/** A notice from the plugin into the agent's own session (kept in its inbox when it cannot be delivered now). */
async function tellAgent(
  ctx: TeamsContext,
  team: TeamConfig,
  agent: AgentState,
  text: string,
): Promise<void> {
  const message = await ctx.store.appendInbox({
    teamName: team.name,
    to: agent.agentId,
    from: SYSTEM_SENDER,
    fromName: SYSTEM_SENDER,
    type: "notice",
    text,
    createdAt: isoNow(ctx.clock),
  });
  await deliverInboxMessage(ctx, team, message);
}

async function teamOf(ctx: TeamsContext, teamName: string): Promise<TeamConfig | undefined> {
  const team = await ctx.store.readTeam(teamName);
  return team.kind === "ok" ? team.value : undefined;
}

/**
 * After an agent's usage was written: tell, warn or stop as its budget and its team's say. At 80% the leader hears
 * once and the agent is asked to wrap up; at 100% the agent is stopped (its running turn aborted), its tasks go back
 * to pending and the leader hears with its usage. Failures are logged: a budget check never breaks the event monitor.
 */
export async function checkBudgets(ctx: TeamsContext, agent: AgentState): Promise<void> {
  if (agent.role === "leader") return;
  try {
    const team = await teamOf(ctx, agent.teamName);
    if (!team) return;
    await checkAgentBudget(ctx, team, agent);
    if (team.budget) await checkTeamBudget(ctx, team);
  } catch (error) {
    ctx.log("warn", "checking an agent's budget failed", { agent: agent.agentId, error: errorText(error) });
  }
}

async function checkAgentBudget(ctx: TeamsContext, team: TeamConfig, agent: AgentState): Promise<void> {
  const { budget, usage } = agent;
  if (!budget || !usage || !isRunning(agent.status)) return;
  const unpriced = budget.tokens === undefined && usage.totals.total > 0 && usage.totals.costUsd === 0;
  if (unpriced && (await claimAgentStage(ctx, agent, "unpricedAt"))) {
    await notifyLeader(ctx, team, {
      type: "notice",
      text: `${agentLabel(agent)} has a budget of ${formatBudget(budget)} but its model ${agent.model} reports no price (cost 0 after ${usage.totals.total} tokens): that budget will never be reached. Kill it, or resume it later with a tokens budget (resume-agent budget { tokens }).`,
    });
  }
  const used = budgetFraction(usage.totals, budget);
  if (used >= 1) {
    if (await claimAgentStage(ctx, agent, "reachedAt"))
      await stopForBudget(ctx, team, [agent], `it reached its budget of ${formatBudget(budget)}`);
    return;
  }
  if (used < BUDGET_WARN_AT || !(await claimAgentStage(ctx, agent, "warnedAt"))) return;
  await notifyLeader(ctx, team, {
    type: "notice",
    text: `${agentLabel(agent)} has used ${Math.floor(used * 100)}% of its budget of ${formatBudget(budget)} (${formatSpend(usage.totals)}). It was asked to wrap up; at 100% it is stopped.`,
    data: { agentId: agent.agentId, usage: usage.totals },
  });
  await tellAgent(
    ctx,
    team,
    agent,
    `You have used ${Math.floor(used * 100)}% of your budget of ${formatBudget(budget)} (${formatSpend(usage.totals)}). Wrap up now: save or commit your work, update your tasks, and call complete-agent with a summary. At 100% you are stopped in the middle of whatever you are doing.`,
  );
}

async function checkTeamBudget(ctx: TeamsContext, team: TeamConfig): Promise<void> {
  const { budget } = team;
  if (!budget) return;
  const { items } = await ctx.store.listAgentViews(team.name);
  const states = items.map((view) => view.state);
  const spent = teamSpend(states).agents.totals;
  const used = budgetFraction(spent, budget);
  if (used >= 1) {
    if (!(await claimTeamStage(ctx, team.name, "reachedAt"))) return;
    const running = states.filter((state) => state.role !== "leader" && isRunning(state.status));
    await stopForBudget(ctx, team, running, `the team reached its budget of ${formatBudget(budget)}`);
    return;
  }
  if (used < BUDGET_WARN_AT || !(await claimTeamStage(ctx, team.name, "warnedAt"))) return;
  await notifyLeader(ctx, team, {
    type: "notice",
    text: `Team ${team.name} has used ${Math.floor(used * 100)}% of its budget of ${formatBudget(budget)} (${formatSpend(spent)}). At 100% every running agent is stopped and no agent can be spawned.`,
    data: { usage: spent },
  });
}

/** End these agents with reason `budget` (aborting their turns), then one notice to the leader with their usage. */
async function stopForBudget(
  ctx: TeamsContext,
  team: TeamConfig,
  agents: readonly AgentState[],
  why: string,
): Promise<void> {
  const lines: string[] = [];
  for (const agent of agents) {
    const finished = await finishAgent(ctx, agent, {
      reason: `budget: ${why}`,
      outcome: "budget",
      history: "budget",
    });
    if (!finished.ended) continue;
    const totals = (await countedUsage(ctx, agent))?.totals;
    lines.push(
      `${agentLabel(agent)} was stopped: ${why}${totals ? ` (spent ${formatSpend(totals)})` : ""}. Tasks returned to pending: ${
        finished.reassignedTasks.length > 0 ? finished.reassignedTasks.join(", ") : "none"
      }. Its work is kept (its worktree too, if it has one); resume-agent with a new budget continues it on the same session.${finished.worktreeKept
        .map((kept) => `\n${kept}.`)
        .join("")}`,
    );
  }
  if (lines.length > 0) await notifyLeader(ctx, team, { type: "notice", text: lines.join("\n") });
}

import { v4 as uuidv4 } from "uuid";
import { isoNow } from "../../clock.ts";
import { assertTeamName } from "../../state/paths.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { refuseWarmupModel } from "../agents/model.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, type OpResult } from "../result.ts";
import { budgetInput, maxAgentsInput } from "../usage/limits.ts";
import { refillSpare } from "../worktrees/spare.ts";

export interface CreateTeamInput {
  teamName: string;
  description?: string;
  defaultModel?: string;
  /** spawn-agent's default for `worktree` in this team. */
  worktrees?: boolean;
  /** What the team's agents together may spend; the plugin option teamBudget when absent. */
  budget?: { usd?: number; tokens?: number };
  /** How many agents may run at once; the plugin option maxAgents when absent. */
  maxAgents?: number;
}

const MODEL_PATTERN = /^[^/\s]+\/\S+$/;

export function assertModelRef(model: string, what: string): void {
  if (!MODEL_PATTERN.test(model)) {
    throw new CallerError(
      `Invalid ${what} '${model}': use "provider/model", for example "anthropic/claude-sonnet-4-5".`,
    );
  }
  refuseWarmupModel(model.slice(0, model.indexOf("/")), what);
}

export const LEADER_COLOR = "white";

/**
 * Why `teamName` cannot be founded again, or undefined when nothing of it is left. A team whose config was lost still
 * has a leader (its agent file holds the leader's session, and the config is rebuilt from it): a new create-team would
 * make a second one.
 */
async function leftoverState(ctx: TeamsContext, teamName: string): Promise<string | undefined> {
  const entries = await ctx.store.teamDirEntries(teamName);
  if (entries.length === 0) return undefined;
  if (entries.includes("config.json")) return `Team '${teamName}' already exists`;
  return `Team '${teamName}' already has state in ${ctx.store.paths.teamDir(teamName)} (${entries.slice(0, 5).join(", ")}) but no readable config. Its leader keeps it: any team tool called by the leader rebuilds the config. To start over, remove that directory by hand, or pick another team name.`;
}

/** The calling session founds the team and becomes its leader. */
export async function createTeam(
  ctx: TeamsContext,
  input: CreateTeamInput,
  sessionId: string,
): Promise<OpResult<{ teamName: string; leaderAgentId: string }>> {
  assertTeamName(input.teamName);
  if (input.defaultModel !== undefined) assertModelRef(input.defaultModel, "defaultModel");
  const budget = budgetInput(input.budget, "budget") ?? ctx.options.teamBudget;
  const maxAgents = maxAgentsInput(input.maxAgents);
  const leftover = await leftoverState(ctx, input.teamName);
  if (leftover) return { success: false, error: leftover };
  const now = isoNow(ctx.clock);
  const leaderAgentId = uuidv4();
  const config: TeamConfig = {
    version: 1,
    name: input.teamName,
    description: input.description,
    createdAt: now,
    leader: leaderAgentId,
    leaderSessionId: sessionId,
    defaultModel: input.defaultModel,
    keepPanes: false,
    ...(input.worktrees !== undefined ? { worktrees: input.worktrees } : {}),
    ...(budget ? { budget } : {}),
    ...(maxAgents !== undefined ? { maxAgents } : {}),
    members: [{ agentId: leaderAgentId, name: "leader", role: "leader", joinedAt: now }],
  };
  // The config is created exclusively: of two concurrent create-team calls exactly one wins.
  if ((await ctx.store.createTeam(config)) === "exists") {
    return { success: false, error: `Team '${input.teamName}' already exists` };
  }
  const leader: AgentState = {
    version: 1,
    agentId: leaderAgentId,
    name: "leader",
    teamName: input.teamName,
    role: "leader",
    model: input.defaultModel ?? "default",
    status: "active",
    color: LEADER_COLOR,
    heartbeatTs: now,
    heartbeatSource: "tool",
    sessionId,
    cwd: ctx.projectRoot,
    consecutiveMisses: 0,
    sessionRotationCount: 0,
    createdAt: now,
    updatedAt: now,
    prompt: input.description ?? "",
    headless: true,
    tags: [],
  };
  await ctx.store.writeAgent(leader);
  await ctx.store.createTasks(input.teamName);
  ctx.log("info", `team ${input.teamName} created`, { leaderAgentId, sessionId });
  // Agents get worktrees by default: the first spawn should not wait for a checkout either.
  if (input.worktrees) refillSpare(ctx, input.teamName);
  return { success: true, teamName: input.teamName, leaderAgentId };
}

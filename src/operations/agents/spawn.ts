import { assertTeamName } from "../../state/paths.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, fail, type OpResult } from "../result.ts";
import { projectServerOrFail } from "../server/prewarm.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
import { budgetInput, teamBudgetRefusal } from "../usage/limits.ts";
import { refillSpare } from "../worktrees/spare.ts";
import { planWorktree } from "../worktrees/worktrees.ts";
import { agentName, planName, resolveCwd } from "./agent-input.ts";
import { launchAgent } from "./launch.ts";
import type { SpawnAgentOutput } from "./launch-spec.ts";
import { resolveModel } from "./model.ts";
import { type SpawnProgress, StepClock } from "./step-clock.ts";

export type { SpawnAgentOutput } from "./launch-spec.ts";

export interface SpawnAgentInput {
  teamName: string;
  prompt: string;
  name?: string;
  model?: string;
  providerId?: string;
  role?: "worker" | "reviewer";
  cwd?: string;
  /** No pane: the agent runs on the server only. */
  headless?: boolean;
  /** How long the agent may run before it counts as timed out (see specs/spawn-agent.md). */
  timeoutMinutes?: number;
  /** Short name of the plan or epic the agent works under; kept in its state, the history and listings. */
  plan?: string;
  /** Its own git worktree: true for branch `teams/<team>/<name>`, a string for that branch (specs/worktrees.md). */
  worktree?: boolean | string;
  /** What the agent may spend before it is stopped (specs/usage-and-budgets.md); the plugin option agentBudget when absent. */
  budget?: { usd?: number; tokens?: number };
}

/** spawn-agent (specs/spawn-agent.md): leader only. Validation and the server here; the rest is launchAgent. */
export async function spawnAgent(
  ctx: TeamsContext,
  input: SpawnAgentInput,
  callerSessionId: string,
  report: SpawnProgress = () => {},
): Promise<OpResult<SpawnAgentOutput>> {
  const steps = new StepClock(ctx.clock, report);
  assertTeamName(input.teamName);
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can spawn agents");
  if (input.prompt.trim() === "") throw new CallerError("prompt must not be empty");
  const role = input.role ?? "worker";
  const headless = input.headless ?? false;
  const model = resolveModel(input, team);
  const requestedName = input.name === undefined ? undefined : agentName(input.name);
  const plan = input.plan === undefined ? undefined : planName(input.plan);
  const cwd = await resolveCwd(ctx, input.cwd);
  const worktree = await planWorktree(ctx, team, input.worktree, cwd);
  if (input.timeoutMinutes !== undefined && !(input.timeoutMinutes > 0)) {
    throw new CallerError("timeoutMinutes must be a positive number");
  }
  const budget = budgetInput(input.budget, "budget") ?? ctx.options.agentBudget;
  const spent = await teamBudgetRefusal(ctx, team);
  if (spent) return fail(spent);
  if (!headless && !(await ctx.edges.tmux.available())) return fail("tmux is required for agent spawning");

  // Asked for now and awaited right before the session: the member is reserved meanwhile. Checking that a running
  // server is ours reads /proc (tens of ms on a busy machine); starting one takes seconds.
  steps.progress("server", "Starting the OpenCode server");
  const server = projectServerOrFail(ctx, "spawn-agent");
  const launched = await launchAgent(
    ctx,
    {
      team,
      server,
      role,
      ...(requestedName !== undefined ? { name: requestedName } : {}),
      model,
      cwd,
      ...(worktree ? { worktree: { create: worktree } } : {}),
      headless,
      ...(input.timeoutMinutes !== undefined ? { timeoutMinutes: input.timeoutMinutes } : {}),
      ...(plan !== undefined ? { plan } : {}),
      ...(budget ? { budget } : {}),
      taskPrompt: input.prompt,
      message: input.prompt,
    },
    steps,
  );
  // The spare (if any) was just taken, or HEAD moved past it: the next spawn's is made now, in the background.
  if (worktree) refillSpare(ctx, team.name);
  return launched;
}

import { killAgent } from "../operations/agents/kill.ts";
import { resumeAgent } from "../operations/agents/resume.ts";
import type { TeamsContext } from "../operations/context.ts";
import { notifyLeader } from "../operations/messages/notify.ts";
import { failureFromError, type OpResult } from "../operations/result.ts";
import { mergeAgent } from "../operations/worktrees/bring-home.ts";
import type { AgentState, TeamConfig } from "../state/schemas.ts";
import { resolveAgent, shortId, teamOrFail } from "./agent-ref.ts";
import { cliWords } from "./cli-words.ts";
import { CliFailure } from "./command.ts";

/*
 * What a person at the terminal does to a team goes through the same operations as the leader's tools, with the
 * leader's authority (the person owns the leader), so every check and refusal is the tools'. The leader is told
 * afterwards: its picture of the team must not go stale behind its back.
 */

/** The team, the agent the person means, and the leader's session to act with. */
async function target(ctx: TeamsContext, teamName: string, who: string) {
  const team = await teamOrFail(ctx, teamName);
  const agent = await resolveAgent(ctx, team, who);
  return { team, agent };
}

/** Run an operation; a refusal or a caller mistake becomes a CliFailure in the CLI's words. */
async function attempt<T extends object>(what: string, run: () => Promise<OpResult<T>>) {
  let result: OpResult<T>;
  try {
    result = await run();
  } catch (error) {
    result = failureFromError(error, what);
  }
  if (!result.success) throw new CliFailure(cliWords(result.error));
  return result;
}

async function tellLeader(ctx: TeamsContext, team: TeamConfig, text: string): Promise<string | undefined> {
  try {
    await notifyLeader(ctx, team, { type: "notice", text: `A person at the terminal ${text}` });
    return undefined;
  } catch (error) {
    return `the leader could not be told: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function label(agent: AgentState): string {
  return `${agent.name} (${shortId(agent.agentId)})`;
}

export async function cliKill(
  ctx: TeamsContext,
  input: { teamName: string; who: string; force: boolean; reason?: string },
  progress: (step: string) => void,
) {
  const { team, agent } = await target(ctx, input.teamName, input.who);
  const reason = input.reason ?? "stopped by a person with `opencode-teams kill`";
  const result = await attempt("kill", () =>
    killAgent(
      ctx,
      { teamName: team.name, agentId: agent.agentId, force: input.force, reason },
      team.leaderSessionId,
      {
        progress,
      },
    ),
  );
  const reassigned = result.reassignedTasks.length;
  const noticeWarning = await tellLeader(
    ctx,
    team,
    `stopped ${label(agent)} with \`opencode-teams kill\` (${result.method}, ${result.phase})${reassigned > 0 ? `; its tasks ${result.reassignedTasks.join(", ")} are pending again` : ""}.`,
  );
  return {
    ...result,
    agent: agent.name,
    agentId: agent.agentId,
    warnings: warningsOf(result, noticeWarning),
  };
}

export async function cliResume(
  ctx: TeamsContext,
  input: { teamName: string; who: string; prompt?: string },
  progress: (step: string) => void,
) {
  const { team, agent } = await target(ctx, input.teamName, input.who);
  const result = await attempt("resume", () =>
    resumeAgent(
      ctx,
      { teamName: team.name, agentId: agent.agentId, ...(input.prompt ? { prompt: input.prompt } : {}) },
      team.leaderSessionId,
      progress,
    ),
  );
  const noticeWarning = await tellLeader(
    ctx,
    team,
    `resumed ${label(agent)} with \`opencode-teams resume\`: it runs again as ${result.name} (${shortId(result.agentId)})${result.sessionReused ? " on its old session" : " on a new session"}.`,
  );
  return { ...result, warnings: warningsOf(result, noticeWarning) };
}

export async function cliMerge(
  ctx: TeamsContext,
  input: { teamName: string; who: string; squash: boolean; force: boolean; message?: string },
) {
  const { team, agent } = await target(ctx, input.teamName, input.who);
  const result = await attempt("merge", () =>
    mergeAgent(
      ctx,
      {
        teamName: team.name,
        agentId: agent.agentId,
        strategy: input.squash ? "squash" : "merge",
        force: input.force,
        ...(input.message ? { message: input.message } : {}),
      },
      team.leaderSessionId,
    ),
  );
  const noticeWarning = await tellLeader(
    ctx,
    team,
    `merged ${label(agent)}'s branch ${result.branch} into ${result.into} with \`opencode-teams merge\` (${result.strategy}, ${result.merged.length} commit(s), now ${result.commit.slice(0, 12)}).`,
  );
  return {
    ...result,
    agent: agent.name,
    agentId: agent.agentId,
    warnings: warningsOf(result, noticeWarning),
  };
}

function warningsOf(result: { warnings?: string[] }, extra: string | undefined): string[] {
  return [...(result.warnings ?? []), ...(extra ? [extra] : [])];
}

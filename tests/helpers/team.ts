import { createTeam } from "../../src/operations/team/team.ts";
import type { TeamsOptions } from "../../src/options.ts";
import type { FiledMessage } from "../../src/state/inbox-files.ts";
import type { AgentState, TeamConfig } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "./context.ts";
import type { FakeSession } from "./fakes.ts";
import { type ToolCall, toolCaller } from "./tools.ts";

/** A team as leadTeam leaves it: the tool caller, the leader's agent id and session, and the team's config. */
export interface LedTeam {
  call: ToolCall;
  leaderId: string;
  leaderSession: FakeSession;
  team: TeamConfig;
}

/**
 * A team led by `leaderSessionId`, created through the create-team tool; the leader runs in this process, so its
 * session is on the local (fake) server, where notices to the leader are delivered.
 */
export async function leadTeam(
  ctx: TestContext,
  teamName = "alpha",
  leaderSessionId = "ses_lead",
): Promise<LedTeam> {
  const call = toolCaller(ctx);
  const created = await call<{ success: boolean; leaderAgentId: string; error?: string }>(
    "create-team",
    { teamName },
    leaderSessionId,
  );
  if (!created.success) throw new Error(`create-team failed: ${created.error}`);
  const leaderSession = ctx.local.addSession({ id: leaderSessionId });
  return { call, leaderId: created.leaderAgentId, leaderSession, team: await teamConfig(ctx, teamName) };
}

/** Team "alpha" led from "ses_lead" (see leadTeam) with one pending task per title, made through create-task. */
export async function teamWithTasks(ctx: TestContext, titles: readonly string[]): Promise<LedTeam> {
  const led = await leadTeam(ctx);
  const made = await led.call<{ success: boolean; error?: string }>(
    "create-task",
    { teamName: "alpha", tasks: titles.map((title) => ({ title })) },
    "ses_lead",
  );
  if (!made.success) throw new Error(`create-task failed: ${made.error}`);
  return led;
}

/** A fresh TestContext (makeTestContext with `options`) and team "alpha" led from it, for a test's beforeEach. */
export async function ledTeamContext(
  options: Partial<TeamsOptions> = {},
): Promise<LedTeam & { ctx: TestContext }> {
  const ctx = await makeTestContext(options);
  return { ctx, ...(await leadTeam(ctx)) };
}

/**
 * A team led by `leaderSessionId` whose agents default to the mock model, created directly (not through the tool);
 * returns the leader's agent id.
 */
export async function mockModelTeam(
  ctx: TestContext,
  leaderSessionId: string,
  teamName = "alpha",
): Promise<string> {
  const team = await createTeam(ctx, { teamName, defaultModel: "mock/mock-model" }, leaderSessionId);
  if (!team.success) throw new Error(`createTeam failed: ${team.error}`);
  return team.leaderAgentId;
}

/** A fresh TestContext (makeTestContext with `options`), its tool caller, and a mockModelTeam led by `leaderSessionId`. */
export async function mockModelTeamContext(
  leaderSessionId: string,
  options: Partial<TeamsOptions> = {},
): Promise<{ ctx: TestContext; call: ToolCall }> {
  const ctx = await makeTestContext(options);
  await mockModelTeam(ctx, leaderSessionId);
  return { ctx, call: toolCaller(ctx) };
}

/**
 * A task the leader creates and sets in progress: taken up by the agent of `by.sessionId` itself, or handed by the
 * leader to `by.assignee`; returns its id.
 */
export async function taskInProgress(
  call: ToolCall,
  leaderSessionId: string,
  title: string,
  by: { sessionId: string } | { assignee: string },
  teamName = "alpha",
): Promise<string> {
  const created = await call<{ task: { id: string } }>("create-task", { teamName, title }, leaderSessionId);
  const update = { teamName, taskId: created.task.id, status: "in_progress" };
  if ("assignee" in by) await call("update-task", { ...update, assignee: by.assignee }, leaderSessionId);
  else await call("update-task", update, by.sessionId);
  return created.task.id;
}

/** The team's config as the store reads it; throws when it is missing or damaged. */
export async function teamConfig(ctx: TestContext, teamName = "alpha"): Promise<TeamConfig> {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind !== "ok") throw new Error(`team ${teamName} unreadable: ${team.kind}`);
  return team.value;
}

/** The messages in the team leader's inbox, oldest first. */
export async function leaderInbox(ctx: TestContext, teamName = "alpha"): Promise<FiledMessage[]> {
  const team = await teamConfig(ctx, teamName);
  return (await ctx.store.readInbox(teamName, team.leader)).items;
}

/** An agent's state as the store reads it; throws when it is missing or damaged. */
export async function agentOnDisk(
  ctx: TestContext,
  agent: Pick<AgentState, "agentId"> & { teamName?: string },
): Promise<AgentState> {
  const teamName = agent.teamName ?? "alpha";
  const read = await ctx.store.readAgent(teamName, agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agent.agentId} unreadable: ${read.kind}`);
  return read.value;
}

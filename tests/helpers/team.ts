import type { AgentState, InboxMessage } from "../../src/state/schemas.ts";
import type { TestContext } from "./context.ts";
import type { FakeSession } from "./fakes.ts";
import { toolCaller } from "./tools.ts";

/**
 * A team led by `leaderSessionId`, created through the create-team tool; the leader runs in this process, so its
 * session is on the local (fake) server, where notices to the leader are delivered.
 */
export async function leadTeam(
  ctx: TestContext,
  teamName = "alpha",
  leaderSessionId = "ses_lead",
): Promise<{ call: ReturnType<typeof toolCaller>; leaderId: string; leaderSession: FakeSession }> {
  const call = toolCaller(ctx);
  const created = await call<{ success: boolean; leaderAgentId: string; error?: string }>(
    "create-team",
    { teamName },
    leaderSessionId,
  );
  if (!created.success) throw new Error(`create-team failed: ${created.error}`);
  const leaderSession = ctx.local.addSession({ id: leaderSessionId });
  return { call, leaderId: created.leaderAgentId, leaderSession };
}

/** The messages in the team leader's inbox, oldest first. */
export async function leaderInbox(ctx: TestContext, teamName = "alpha"): Promise<InboxMessage[]> {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind !== "ok") throw new Error(`team ${teamName} unreadable: ${team.kind}`);
  return (await ctx.store.readInbox(teamName, team.value.leader)).items;
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

import type { AgentState } from "../../state/schemas.ts";
import type { AgentUsage } from "../../state/usage-schema.ts";
import type { TeamsContext } from "../context.ts";

/**
 * An agent's usage as last counted, for a caller holding the agent file's state: the count lives in the heartbeat
 * slot (views show it on the state already). A slot that cannot be read leaves what the state has.
 */
export async function countedUsage(ctx: TeamsContext, agent: AgentState): Promise<AgentUsage | undefined> {
  const slot = await ctx.store.readHeartbeat(agent.teamName, agent.agentId).catch(() => undefined);
  return slot?.record?.usage ?? agent.usage;
}

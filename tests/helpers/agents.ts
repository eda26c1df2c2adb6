import { v4 as uuidv4 } from "uuid";
import type { TeamsContext } from "../../src/operations/context.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import type { ToolCall } from "./tools.ts";

/** An active, headless worker's state as spawn leaves it, now by the context's clock. */
export function agentFixture(
  ctx: TeamsContext,
  teamName: string,
  overrides: Partial<AgentState> = {},
): AgentState {
  const now = new Date(ctx.clock.now()).toISOString();
  return {
    version: 1,
    agentId: uuidv4(),
    name: "worker-1",
    teamName,
    role: "worker",
    model: "mock/mock-model",
    status: "active",
    color: "blue",
    heartbeatTs: now,
    sessionId: `ses_${Math.random().toString(36).slice(2, 10)}`,
    cwd: ctx.projectRoot,
    consecutiveMisses: 0,
    sessionRotationCount: 0,
    createdAt: now,
    updatedAt: now,
    prompt: "Do the work",
    headless: true,
    tags: [],
    ...overrides,
  };
}

/** Register an agent directly in state (as spawn would), for tests of what happens after a spawn. */
export async function addAgent(
  ctx: TeamsContext,
  teamName: string,
  overrides: Partial<AgentState> = {},
): Promise<AgentState> {
  const agent = agentFixture(ctx, teamName, overrides);
  const now = new Date(ctx.clock.now()).toISOString();
  await ctx.store.writeAgent(agent);
  await ctx.store.updateTeam(teamName, (team) =>
    team
      ? {
          ...team,
          members: [
            ...team.members,
            { agentId: agent.agentId, name: agent.name, role: agent.role, joinedAt: now },
          ],
        }
      : undefined,
  );
  return agent;
}

/** What spawn-agent and resume-agent answer about the agent they launched. */
export interface Launched {
  success: boolean;
  error?: string;
  agentId: string;
  sessionId: string;
}

/** A headless agent spawned through the spawn-agent tool as `leaderSessionId` (its session on the fake server). */
export async function spawnHeadless(
  call: ToolCall,
  leaderSessionId: string,
  prompt = "Build the parser",
  teamName = "alpha",
): Promise<Pick<Launched, "agentId" | "sessionId">> {
  const spawned = await call<Partial<Launched>>(
    "spawn-agent",
    { teamName, prompt, headless: true },
    leaderSessionId,
  );
  if (!spawned.success || !spawned.agentId || !spawned.sessionId)
    throw new Error(`spawn-agent failed: ${spawned.error}`);
  return { agentId: spawned.agentId, sessionId: spawned.sessionId };
}

/** Declare an agent lost (inactive) as the sweep would, with `fields` over that; returns its new state. */
export async function markLost(
  ctx: TeamsContext,
  agentId: string,
  fields: Partial<AgentState> = {},
  teamName = "alpha",
): Promise<AgentState> {
  const { value } = await ctx.store.updateAgent(teamName, agentId, (state) =>
    state ? { ...state, status: "inactive", statusReason: "no heartbeat for 2 sweeps", ...fields } : state,
  );
  if (!value) throw new Error(`agent ${agentId} not found`);
  return value;
}

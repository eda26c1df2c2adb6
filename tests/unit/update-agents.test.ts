import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";

let ctx: TestContext;
let agents: AgentState[];

beforeEach(async () => {
  ctx = await makeTestContext();
  const created = await createTeam(ctx, { teamName: "alpha" }, "ses_lead");
  if (!created.success) throw new Error(created.error);
  agents = [];
  for (let i = 1; i <= 3; i++) agents.push(await addAgent(ctx, "alpha", { name: `worker-${i}` }));
});
afterEach(() => ctx.cleanup());

async function onDisk(agent: AgentState): Promise<AgentState> {
  return JSON.parse(await readFile(ctx.store.paths.agentState("alpha", agent.agentId), "utf8")) as AgentState;
}

describe("updateAgents", () => {
  test("each decision is written into its agent file; results come back in the order asked", async () => {
    const ids = agents.map((a) => a.agentId).reverse();
    const results = await ctx.store.updateAgents("alpha", ids, async (agentId, state) => ({
      ...(state ? { next: { ...state, status: "inactive" as const, statusReason: "swept" } } : {}),
      result: agentId,
    }));
    expect(results).toEqual(ids);
    for (const agent of agents) expect((await onDisk(agent)).status).toBe("inactive");
  });

  test("a decision without a new state writes nothing; a missing agent is decided as undefined", async () => {
    const before = await onDisk(agents[0] as AgentState);
    const missing = "0b0e1f1e-1d2c-4b3a-8f9e-0a1b2c3d4e5f";
    const seen: (AgentState | undefined)[] = [];
    await ctx.store.updateAgents("alpha", [agents[0]?.agentId ?? "", missing], async (_id, state) => {
      seen.push(state);
      return { result: null };
    });
    // Decided concurrently: in no particular order.
    expect(seen).toHaveLength(2);
    expect(seen.filter((s) => s !== undefined).map((s) => s.agentId)).toEqual([
      (agents[0] as AgentState).agentId,
    ]);
    expect(await onDisk(agents[0] as AgentState)).toEqual(before);
  });

  test("decisions run under the agent's lock: a heartbeat-style update waits and sees the new state", async () => {
    const [first] = agents as [AgentState];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const batch = ctx.store.updateAgents("alpha", [first.agentId], async (_id, state) => {
      await gate;
      return { ...(state ? { next: { ...state, status: "inactive" as const } } : {}), result: null };
    });
    let sawStatus: string | undefined;
    const update = ctx.store.updateAgent("alpha", first.agentId, (state) => {
      sawStatus = state?.status;
      return undefined;
    });
    await Bun.sleep(30);
    expect(sawStatus).toBeUndefined();
    release();
    await Promise.all([batch, update]);
    expect(sawStatus).toBe("inactive");
  });
});

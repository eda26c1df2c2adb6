/**
 * The sweep used to write mass transitions to a team-wide agent-journal.json that every read laid over the agent
 * files. A damaged journal was moved aside and read as empty, silently: agents already declared inactive (their tasks
 * handed back) read as active again. Now each agent file is the one truth; a file at the old journal's path is inert.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";

let ctx: TestContext;
beforeEach(async () => {
  ctx = await makeTestContext();
  await createTeam(ctx, { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

test("agents declared inactive stay inactive whatever happens to agent-journal.json", async () => {
  const agents: AgentState[] = [];
  for (let i = 1; i <= 3; i++) agents.push(await addAgent(ctx, "alpha", { name: `worker-${i}` }));
  const sweeper = new StaleSweeper(ctx);
  let ended = 0;
  // Right after the sweep that ends them: no later sweep has had a chance to tidy anything up.
  for (let sweep = 0; sweep < 3 && ended < 3; sweep++) {
    ctx.clock.advance(sweep === 0 ? 61_000 : 15_000);
    ended += (await sweeper.sweep()).inactive.length;
  }
  expect(ended).toBe(3);

  await writeFile(path.join(ctx.store.paths.teamDir("alpha"), "agent-journal.json"), "{ torn");
  for (const agent of agents) {
    const read = await ctx.store.readAgent("alpha", agent.agentId);
    expect(read.kind === "ok" && read.value.status).toBe("inactive");
  }
  const listed = await ctx.store.listAgentViews("alpha");
  expect(listed.items.filter((v) => v.state.role === "worker").map((v) => v.state.status)).toEqual([
    "inactive",
    "inactive",
    "inactive",
  ]);
});

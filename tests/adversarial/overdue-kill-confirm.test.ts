/**
 * The stale sweep finishes a graceful kill whose caller died. It used to pick graceful or force from the record it had
 * read earlier: a confirm-shutdown landing in between was recorded as interrupted, its history as interrupted. The
 * choice is made under finishAgent's lock, from the record as it is then.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { finishOverdueKill } from "../../src/operations/agents/kill.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;

beforeEach(async () => {
  ctx = await makeTestContext({ shutdownTimeoutMs: 30_000 });
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

async function state(agentId: string): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

test("a confirmation that lands after the sweep's read still ends the kill gracefully", async () => {
  const now = ctx.clock.now();
  const agent = await addAgent(ctx, "alpha", {
    name: "w",
    status: "shutting_down",
    statusReason: "wrap up",
    shutdownRequestedAt: new Date(now).toISOString(),
    shutdownDeadlineAt: new Date(now + 30_000).toISOString(),
  });
  ctx.server.addSession({ id: agent.sessionId, activity: "busy" });
  // The sweep read the agent unconfirmed; then the agent's confirm-shutdown landed.
  const readBySweep = await state(agent.agentId);
  const confirm = await toolCaller(ctx)(
    "confirm-shutdown",
    { teamName: "alpha", agentId: agent.agentId },
    agent.sessionId,
  );
  expect(confirm).toMatchObject({ success: true });

  const finished = await finishOverdueKill(ctx, readBySweep);

  expect(finished.ended).toBe(true);
  const ended = await state(agent.agentId);
  expect(ended).toMatchObject({ status: "terminated", outcome: "killed" });
  expect(ended.statusReason).toContain("wrap up; confirmed");
  const history = JSON.parse(await readFile(ctx.store.paths.history("alpha"), "utf8")) as {
    entries: { agent_id: string; status: string }[];
  };
  expect(history.entries.filter((e) => e.agent_id === agent.agentId).map((e) => e.status)).toEqual([
    "completed",
  ]);
});

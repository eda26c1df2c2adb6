/**
 * A graceful kill's caller can die mid-wait (its tool call cut off, OpenCode restarted). The agent then stayed
 * `shutting_down` for good with its task held: nothing else ever finished the kill. The deadline is recorded in the
 * agent's state, and the stale sweep finishes a kill one sweep interval past it, as its caller would have, exactly once
 * however many sweepers run.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { killAgent } from "../../src/operations/agents/kill.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import type { AgentState, InboxMessage } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { taskInProgress } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

const S = 1_000;
const LEADER = "ses_lead";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let leaderId: string;

beforeEach(async () => {
  ctx = await makeTestContext({ shutdownTimeoutMs: 30 * S });
  call = toolCaller(ctx);
  leaderId = (await call<{ leaderAgentId: string }>("create-team", { teamName: "alpha" }, LEADER))
    .leaderAgentId;
});
afterEach(() => ctx.cleanup());

async function state(agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

async function historyOf(agentId: string): Promise<{ status: string; reason?: string }[]> {
  const text = await readFile(ctx.store.paths.history("alpha"), "utf8").catch(() => '{"entries":[]}');
  const history = JSON.parse(text) as { entries: { agent_id: string; status: string; reason?: string }[] };
  return history.entries.filter((entry) => entry.agent_id === agentId);
}

async function notices(): Promise<InboxMessage[]> {
  return (await ctx.store.readInbox("alpha", leaderId)).items.filter((m) => m.type === "notice");
}

/** A worker holding a task, left `shutting_down` by a kill whose caller died while it waited. */
async function abandonedKill(
  overrides: Partial<AgentState> = {},
): Promise<{ agent: AgentState; taskId: string }> {
  const agent = await addAgent(ctx, "alpha", { name: "w" });
  ctx.server.addSession({ id: agent.sessionId, activity: "busy" });
  const taskId = await taskInProgress(call, LEADER, "t", { sessionId: agent.sessionId });
  const now = ctx.clock.now();
  await ctx.store.updateAgent("alpha", agent.agentId, (current) =>
    current
      ? {
          ...current,
          status: "shutting_down",
          statusReason: "wrap up",
          shutdownRequestedAt: new Date(now).toISOString(),
          shutdownDeadlineAt: new Date(now + ctx.options.shutdownTimeoutMs).toISOString(),
          ...overrides,
        }
      : undefined,
  );
  return { agent, taskId };
}

test("a graceful kill records its deadline in the agent's state", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w" });
  ctx.server.addSession({ id: agent.sessionId });
  const controller = new AbortController();
  // The kill's wait moves the test's clock: the deadline counts from when it asked.
  const askedAt = ctx.clock.now();
  const killing = killAgent(ctx, { teamName: "alpha", agentId: agent.agentId }, LEADER, {
    signal: controller.signal,
  });
  for (let i = 0; i < 200 && (await state(agent)).status !== "shutting_down"; i++) await Bun.sleep(5);
  expect((await state(agent)).shutdownDeadlineAt).toBe(
    new Date(askedAt + ctx.options.shutdownTimeoutMs).toISOString(),
  );
  controller.abort();
  await killing;
});

test("the sweep finishes a kill whose caller died, once, even with two sweepers", async () => {
  const { agent, taskId } = await abandonedKill();
  const sweepers = [new StaleSweeper(ctx), new StaleSweeper(ctx)];

  // At the deadline the caller may still be finishing its own kill: left alone.
  ctx.clock.advance(ctx.options.shutdownTimeoutMs + S);
  await sweepers[0]?.sweep();
  expect((await state(agent)).status).toBe("shutting_down");

  ctx.clock.advance(ctx.options.sweepIntervalMs);
  const reports = await Promise.all(sweepers.map((sweeper) => sweeper.sweep()));
  const ended = await state(agent);
  expect(ended).toMatchObject({ status: "terminated", outcome: "interrupted" });
  expect(reports.map((r) => r.killsFinished).sort()).toEqual([0, 1]);
  expect(ended.statusReason).toContain("wrap up; no confirmation by");
  const board = await ctx.store.readTasks("alpha");
  expect(board.kind === "ok" && board.value.tasks.find((t) => t.id === taskId)).toMatchObject({
    status: "pending",
  });
  expect((await historyOf(agent.agentId)).filter((e) => e.status === "interrupted")).toHaveLength(1);
  expect(await notices()).toHaveLength(1);
  expect(ctx.server.calls.filter((c) => c === `abortSession ${agent.sessionId}`)).toHaveLength(1);

  // Later sweeps have nothing left to do.
  ctx.clock.advance(ctx.options.sweepIntervalMs);
  expect((await sweepers[1]?.sweep())?.killsFinished).toBe(0);
  expect(await notices()).toHaveLength(1);
});

test("a confirmed shutdown whose caller died ends gracefully; a file without a recorded deadline counts from the request", async () => {
  const { agent } = await abandonedKill({
    shutdownConfirmedAt: new Date(ctx.clock.now()).toISOString(),
    shutdownDeadlineAt: undefined,
  });
  ctx.clock.advance(ctx.options.shutdownTimeoutMs + ctx.options.sweepIntervalMs);
  const report = await new StaleSweeper(ctx).sweep();
  expect(await state(agent)).toMatchObject({ status: "terminated", outcome: "killed" });
  expect(report.killsFinished).toBe(1);
  expect((await historyOf(agent.agentId)).map((e) => e.status)).toContain("completed");
});

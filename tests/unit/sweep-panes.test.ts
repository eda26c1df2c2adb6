import { afterEach, beforeEach, expect, test } from "bun:test";
import { v4 as uuidv4 } from "uuid";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";

let ctx: TestContext;

beforeEach(async () => ({ ctx } = await mockModelTeamContext("ses_leader")));
afterEach(() => ctx.cleanup());

async function withPane(name: string) {
  const agentId = uuidv4();
  const pane = await ctx.tmux.openAgentPane(agentId, name);
  const session = ctx.server.addSession({ title: name });
  return addAgent(ctx, "alpha", {
    agentId,
    name,
    sessionId: session.id,
    paneId: pane.paneId,
    tmux: { session: "s", window: "w", server: pane.server },
  });
}

test("a closed pane makes a fresh, heartbeating agent inactive at the next sweep, not after the stale window", async () => {
  const sweeper = new StaleSweeper(ctx);
  const kept = await withPane("kept");
  const closed = await withPane("closed");
  expect((await sweeper.sweep()).inactive).toHaveLength(0);

  const pane = ctx.tmux.panes.get(closed.paneId ?? "");
  if (pane) pane.alive = false;
  ctx.clock.advance(ctx.options.sweepIntervalMs);
  const queriesBefore = ctx.tmux.livePaneQueries;
  const report = await sweeper.sweep();
  expect(report.inactive.map((i) => [i.agent.name, i.cause])).toEqual([["closed", "pane_gone"]]);
  // One pane listing for the tmux server, not one tmux call per agent.
  expect(ctx.tmux.livePaneQueries - queriesBefore).toBe(1);
  const read = await ctx.store.readAgent("alpha", kept.agentId);
  expect(read.kind === "ok" && read.value.status).toBe("active");
});

test("tmux that cannot be asked is no evidence of death", async () => {
  const sweeper = new StaleSweeper(ctx);
  await withPane("a");
  await sweeper.sweep();
  ctx.tmux.installed = false;
  ctx.clock.advance(ctx.options.sweepIntervalMs);
  expect((await sweeper.sweep()).inactive).toHaveLength(0);
});

test("an agent read before spawn recorded its pane is read again, so its pane is watched from then on", async () => {
  const sweeper = new StaleSweeper(ctx);
  const session = ctx.server.addSession({ title: "late" });
  const agent = await addAgent(ctx, "alpha", { name: "late", sessionId: session.id, headless: false });
  await sweeper.sweep();
  const pane = await ctx.tmux.openAgentPane(agent.agentId, "late");
  await ctx.store.updateAgent("alpha", agent.agentId, (state) =>
    state ? { ...state, paneId: pane.paneId, tmux: { session: "s", window: "w" } } : undefined,
  );
  ctx.clock.advance(ctx.options.sweepIntervalMs);
  await sweeper.sweep();
  const tracked = ctx.tmux.panes.get(pane.paneId);
  if (tracked) tracked.alive = false;
  ctx.clock.advance(ctx.options.sweepIntervalMs);
  expect((await sweeper.sweep()).inactive.map((i) => i.cause)).toEqual(["pane_gone"]);
});

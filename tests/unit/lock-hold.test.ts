import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { spawnAgent } from "../../src/operations/agents/spawn.ts";
import { heartbeat } from "../../src/operations/liveness/heartbeat.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { ledTeamContext, mockModelTeamContext } from "../helpers/team.ts";

/**
 * The hot critical sections under an agent's lock (a heartbeat, an event the monitor applies, spawn recording its
 * launch) do their I/O with blocking calls, and a free lock is taken and given back with blocking calls too: the lock
 * is given back before the event loop turns again. A process busy with other work (OpenCode serving its panes) can
 * then not keep an agent's lock for the length of its stalls, which made a spawn wait up to 2 s for it. A watcher that
 * runs on every turn of the loop must never find an agent's lock held.
 */

let ctx: TestContext;
afterEach(() => ctx.cleanup());

/** Watches `dir` on every turn of the event loop; stop() says how many turns ran and which locks they saw. */
function watchLocks(dir: string): () => { turns: number; seen: string[] } {
  let turns = 0;
  let stopped = false;
  const seen: string[] = [];
  const tick = () => {
    if (stopped) return;
    turns++;
    for (const name of readdirSync(dir)) if (name.endsWith(".json.lock")) seen.push(name);
    setImmediate(tick);
  };
  setImmediate(tick);
  return () => {
    stopped = true;
    return { turns, seen };
  };
}

/** Lets the watcher run between two calls, so it is not only the calls' own turns that it sees. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("an agent's lock is held through no turn of the event loop", () => {
  test("heartbeats, the plain one and the one that changes the agent's status", async () => {
    ({ ctx } = await ledTeamContext());
    const agent = await addAgent(ctx, "alpha");
    const stop = watchLocks(ctx.store.paths.agentsDir("alpha"));
    for (let i = 0; i < 20; i++) {
      const status = i % 2 === 0 ? "idle" : "active";
      const result = await heartbeat(
        ctx,
        { agentId: agent.agentId, teamName: "alpha", status },
        agent.sessionId,
      );
      expect(result.success).toBe(true);
      await nextTurn();
    }
    const { turns, seen } = stop();
    expect(turns).toBeGreaterThanOrEqual(20);
    expect(seen).toEqual([]);
  });

  test("events the monitor applies: activity, busy, idle, and a death (its session deleted)", async () => {
    ({ ctx } = await ledTeamContext());
    const agent = await addAgent(ctx, "alpha");
    const monitor = new EventMonitor(ctx, { indexRebuildMs: 0 });
    const stop = watchLocks(ctx.store.paths.agentsDir("alpha"));
    const sessionID = agent.sessionId;
    for (let i = 0; i < 10; i++) {
      monitor.handleEvent({ type: "session.status", properties: { sessionID, status: { type: "busy" } } });
      await monitor.settled();
      await nextTurn();
      monitor.handleEvent({ type: "session.updated", properties: { info: { id: sessionID, title: "t" } } });
      await monitor.settled();
      await nextTurn();
      monitor.handleEvent({ type: "session.idle", properties: { sessionID } });
      await monitor.settled();
      await nextTurn();
    }
    monitor.handleEvent({ type: "session.deleted", properties: { info: { id: sessionID, title: "t" } } });
    await monitor.settled();
    const { turns, seen } = stop();
    const slot = await ctx.store.readHeartbeat("alpha", agent.agentId);
    expect(slot.record?.updates).toBeGreaterThanOrEqual(20);
    const dead = await ctx.store.readAgent("alpha", agent.agentId);
    expect(dead.kind === "ok" && dead.value.status).toBe("inactive");
    expect(turns).toBeGreaterThanOrEqual(30);
    expect(seen).toEqual([]);
  });

  test("spawn-agent recording the pane and the agent active", async () => {
    ({ ctx } = await mockModelTeamContext("ses_leader", { promptRetryDelayMs: 0 }));
    const stop = watchLocks(ctx.store.paths.agentsDir("alpha"));
    for (let i = 0; i < 3; i++) {
      const result = await spawnAgent(ctx, { teamName: "alpha", prompt: "Build the thing" }, "ses_leader");
      if (!result.success) throw new Error(result.error);
      expect(result.status).toBe("active");
    }
    const { turns, seen } = stop();
    expect(turns).toBeGreaterThan(0);
    expect(seen).toEqual([]);
  });
});

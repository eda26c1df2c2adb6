import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { pidAlive } from "../../src/edges/process.ts";
import { childPids, terminateProcess } from "../../src/edges/process-info.ts";
import type { KillAgentOutput } from "../../src/operations/agents/kill.ts";
import { ColorPoolSchema } from "../../src/state/color-store.ts";
import { type AgentState, ServerInfoSchema } from "../../src/state/schemas.ts";
import { readJson } from "../../src/state/store.ts";
import { holdClockAt } from "../helpers/clock-hold.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { mockModelTeam, taskInProgress } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

const LEADER = "ses_leader";

type KillResult = KillAgentOutput & { success: boolean; error?: string };

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let leaderId: string;

async function setup(options: Record<string, unknown> = {}) {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, shutdownTimeoutMs: 2_000, ...options });
  call = toolCaller(ctx);
  leaderId = await mockModelTeam(ctx, LEADER);
}

beforeEach(() => setup());
afterEach(() => ctx.cleanup());

async function spawnOne(args: Record<string, unknown> = {}) {
  const result = await call<{
    success: boolean;
    agentId: string;
    sessionId: string;
    paneId?: string;
    error?: string;
  }>("spawn-agent", { teamName: "alpha", prompt: "work", ...args }, LEADER);
  if (!result.success) throw new Error(result.error);
  return result;
}

async function agent(agentId: string): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agentId);
  if (read.kind !== "ok") throw new Error("no agent");
  return read.value;
}

const kill = (args: Record<string, unknown>, session = LEADER) =>
  call<KillResult>("kill-agent", { teamName: "alpha", ...args }, session);

/**
 * Plays the agent (or its caller): runs `act` once the test's clock is `afterMs` past now. The kill's own waits move
 * the manual clock, so this lands in the middle of its wait without any wall time passing; the wait is held there
 * until `act` is done, so a slow act cannot let the kill poll on through its deadline. Fails when `waiting` (the kill)
 * ends before its wait reaches that time.
 */
async function once(
  afterMs: number,
  waiting: Promise<unknown>,
  act: () => Promise<unknown>,
): Promise<unknown> {
  const hold = holdClockAt(ctx.clock, ctx.clock.now() + afterMs);
  try {
    const ended = waiting.then(() => "ended" as const);
    if ((await Promise.race([hold.reached, ended])) === "ended") {
      throw new Error(`the wait ended before the clock reached +${afterMs} ms`);
    }
    return await act();
  } finally {
    hold.release();
  }
}

const confirm = (agentId: string, sessionId: string) =>
  call<{ success: boolean; message: string }>("confirm-shutdown", { teamName: "alpha", agentId }, sessionId);

async function historyOf(agentId: string) {
  const history = JSON.parse(await readFile(ctx.store.paths.history("alpha"), "utf8")) as {
    entries: { agent_id: string; status: string; reason?: string }[];
  };
  return history.entries.filter((e) => e.agent_id === agentId);
}

describe("kill-agent force", () => {
  test("aborts, closes the pane, hands back tasks, releases the color, terminates, records interrupted", async () => {
    const a = await spawnOne();
    const taskId = await taskInProgress(call, LEADER, "t1", { sessionId: a.sessionId });
    await recordServerInfo(ctx, 28001, { activeSessions: 1 });

    const result = await kill({ agentId: a.agentId, force: true, reason: "no longer needed" });
    expect(result).toMatchObject({
      success: true,
      method: "force",
      phase: "forced",
      reassignedTasks: [taskId],
    });
    expect(result.title).toBe("Agent stopped (force, forced)");
    expect(ctx.server.calls).toContain(`abortSession ${a.sessionId}`);
    expect(ctx.tmux.panes.get(a.paneId ?? "")?.alive).toBe(false);
    const state = await agent(a.agentId);
    expect(state).toMatchObject({
      status: "terminated",
      statusReason: "no longer needed",
      outcome: "interrupted",
    });
    expect(state.terminatedAt).toBeDefined();
    const board = await ctx.store.readTasks("alpha");
    expect(board.kind === "ok" && board.value.tasks[0]).toMatchObject({ status: "pending", assignee: null });
    const pool = await readJson(ctx.store.paths.colorPool, ColorPoolSchema);
    expect(pool.kind === "ok" && pool.value.assignments.every((x) => x.releasedAt)).toBe(true);
    const info = await readJson(ctx.store.paths.serverInfo(ctx.projectRoot), ServerInfoSchema);
    expect(info.kind === "ok" && info.value.activeSessions).toBe(0);
    expect(await historyOf(a.agentId)).toEqual([
      expect.objectContaining({ status: "interrupted", reason: "no longer needed" }),
    ]);
    // The session itself stays on the server (resume can continue it).
    expect(ctx.server.sessions.has(a.sessionId)).toBe(true);
  });

  test("an attach process that outlives its pane is terminated by its recorded pid (and only ours)", async () => {
    const a = await spawnOne();
    // Stands in for `opencode attach ... --session <id>` that ignores SIGHUP and SIGTERM, with a child of its own.
    const attach = Bun.spawn(
      ["sh", "-c", 'trap "" HUP TERM; sleep 300 & wait', "attach", "--session", a.sessionId],
      {
        stdio: ["ignore", "ignore", "ignore"],
      },
    );
    const stranger = Bun.spawn(["sh", "-c", 'trap "" HUP TERM; exec sleep 300', "not-ours"], {
      stdio: ["ignore", "ignore", "ignore"],
    });
    try {
      for (let i = 0; i < 100 && (await childPids(attach.pid)).length === 0; i++) await Bun.sleep(10);
      await ctx.store.updateAgent("alpha", a.agentId, (s) =>
        s ? { ...s, attachPid: attach.pid } : undefined,
      );
      const result = await kill({ agentId: a.agentId, force: true });
      expect(result.success).toBe(true);
      expect(result.warnings).toBeUndefined();
      expect(pidAlive(attach.pid)).toBe(false);

      const b = await spawnOne();
      await ctx.store.updateAgent("alpha", b.agentId, (s) =>
        s ? { ...s, attachPid: stranger.pid } : undefined,
      );
      await kill({ agentId: b.agentId, force: true });
      expect(pidAlive(stranger.pid)).toBe(true);
    } finally {
      for (const pid of [...(await childPids(attach.pid)), attach.pid, stranger.pid])
        await terminateProcess(pid, 100);
    }
  });

  test("an inactive agent is finished without a graceful request (phase not_running)", async () => {
    const a = await spawnOne();
    await ctx.store.updateAgent("alpha", a.agentId, (s) =>
      s ? { ...s, status: "inactive", outcome: "interrupted" } : undefined,
    );
    const result = await kill({ agentId: a.agentId });
    expect(result).toMatchObject({ success: true, method: "force", phase: "not_running" });
    expect(ctx.server.sessions.get(a.sessionId)?.prompts).toHaveLength(1);
    expect((await agent(a.agentId)).status).toBe("terminated");
  });
});

describe("kill-agent graceful", () => {
  test("the agent is asked, confirms with confirm-shutdown, and is finished gracefully", async () => {
    await ctx.cleanup();
    await setup({ shutdownTimeoutMs: 600_000 });
    const a = await spawnOne();
    const started = ctx.clock.now();
    const killing = kill({ agentId: a.agentId, reason: "wrap up" });
    const confirming = once(500, killing, async () => {
      const state = await agent(a.agentId);
      expect(state.status).toBe("shutting_down");
      expect(state.shutdownRequestedAt).toBeDefined();
      const request = ctx.server.sessions.get(a.sessionId)?.prompts[1];
      expect(request?.text).toContain("The team leader asks you to shut down: wrap up");
      expect(request?.text).toContain(`"agentId": "${a.agentId}"`);
      expect(request?.model).toEqual({ providerID: "mock", modelID: "mock-model" });
      return confirm(a.agentId, a.sessionId);
    });
    const result = await killing;
    expect(await confirming).toMatchObject({ success: true });
    // It waited for the confirmation (on the test's clock), not for the deadline.
    expect(ctx.clock.now() - started).toBeGreaterThanOrEqual(500);
    expect(ctx.clock.now() - started).toBeLessThan(600_000);
    expect(result).toMatchObject({ success: true, method: "graceful", phase: "confirmed" });
    expect(await agent(a.agentId)).toMatchObject({ status: "terminated", outcome: "killed" });
    expect(ctx.tmux.panes.get(a.paneId ?? "")?.alive).toBe(false);
    expect(await historyOf(a.agentId)).toEqual([
      expect.objectContaining({ status: "completed", reason: "wrap up" }),
    ]);
  });

  test("no confirmation in time: finished as force (phase timeout)", async () => {
    await ctx.cleanup();
    await setup({ shutdownTimeoutMs: 60 });
    const a = await spawnOne();
    const started = ctx.clock.now();
    const result = await kill({ agentId: a.agentId });
    expect(ctx.clock.now() - started).toBeGreaterThanOrEqual(60);
    expect(result).toMatchObject({ success: true, method: "force", phase: "timeout" });
    expect(result.warnings?.[0]).toContain("did not confirm within 60 ms");
    expect((await agent(a.agentId)).outcome).toBe("interrupted");
  });

  test("the request cannot be sent (server down): finished as force (phase unreachable)", async () => {
    const a = await spawnOne();
    ctx.projectServerUp = false;
    const result = await kill({ agentId: a.agentId });
    expect(result).toMatchObject({ success: true, method: "force", phase: "unreachable" });
    expect(result.warnings?.join(" ")).toContain("not running");
    expect((await agent(a.agentId)).status).toBe("terminated");
  });

  test("the tool call's abort stops the wait and finishes as force", async () => {
    await ctx.cleanup();
    await setup({ shutdownTimeoutMs: 600_000 });
    const a = await spawnOne();
    const controller = new AbortController();
    const { killAgent } = await import("../../src/operations/agents/kill.ts");
    const started = ctx.clock.now();
    const killing = killAgent(ctx, { teamName: "alpha", agentId: a.agentId }, LEADER, {
      signal: controller.signal,
    });
    await once(1_000, killing, async () => controller.abort());
    const result = await killing;
    expect(ctx.clock.now() - started).toBeLessThan(600_000);
    expect(result).toMatchObject({ success: true, method: "force", phase: "timeout" });
  });

  test("confirm-shutdown refuses another session and an agent nobody asked to stop", async () => {
    const a = await spawnOne();
    const wrong = await call<{ error: string }>(
      "confirm-shutdown",
      { teamName: "alpha", agentId: a.agentId },
      "ses_x",
    );
    expect(wrong.error).toBe(`Agent '${a.agentId}' does not belong to this session`);
    const early = await call<{ error: string }>(
      "confirm-shutdown",
      { teamName: "alpha", agentId: a.agentId },
      a.sessionId,
    );
    expect(early.error).toMatch(/^No shutdown was requested for agent 'worker-1'/);
  });
});

describe("kill-agent errors", () => {
  test("not the leader, the leader itself, unknown agent, terminated agent, bad ids", async () => {
    const a = await spawnOne();
    expect((await kill({ agentId: a.agentId }, "ses_stranger")).error).toBe(
      "Only the team leader can kill agents",
    );
    expect((await kill({ agentId: a.agentId }, a.sessionId)).error).toBe(
      "Only the team leader can kill agents",
    );
    expect((await kill({ agentId: leaderId })).error).toBe("The team leader cannot kill itself");
    const missing = "4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e2f";
    expect((await kill({ agentId: missing })).error).toBe(
      `Agent '${missing}' not found in team 'alpha': call list-agents for its agents and their ids.`,
    );
    expect((await kill({ agentId: "../x" })).error).toMatch(/^Invalid agent id/);
    expect((await kill({ teamName: "nope", agentId: a.agentId })).error).toBe("Team 'nope' does not exist");
    await kill({ agentId: a.agentId, force: true });
    expect((await kill({ agentId: a.agentId, force: true })).error).toBe(
      `Agent 'worker-1' (${a.agentId}) is already terminated`,
    );
  });
});

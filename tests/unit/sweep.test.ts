import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { recordSpawned } from "../../src/operations/history/history.ts";
import { nextHeartbeat } from "../../src/operations/liveness/heartbeat.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { reassignTasksOf } from "../../src/operations/team/task.ts";
import {
  AgentHistorySchema,
  type AgentState,
  type HistoryEntry,
  type TaskBoard,
} from "../../src/state/schemas.ts";
import { readJson } from "../../src/state/store.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { agentOnDisk, type LedTeam, leaderInbox, ledTeamContext, taskInProgress } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let lead: LedTeam;
let sweeper: StaleSweeper;

const S = 1_000;

beforeEach(async () => {
  ({ ctx, ...lead } = await ledTeamContext());
  sweeper = new StaleSweeper(ctx);
});
afterEach(() => ctx.cleanup());

async function worker(overrides: Partial<AgentState> = {}, activity: FakeSession["activity"] = "idle") {
  const agent = await addAgent(ctx, "alpha", overrides);
  ctx.server.addSession({ id: agent.sessionId, activity });
  await recordSpawned(ctx, agent);
  return agent;
}

async function history(): Promise<HistoryEntry[]> {
  const read = await readJson(ctx.store.paths.history("alpha"), AgentHistorySchema);
  return read.kind === "ok" ? read.value.entries : [];
}

const state = (agent: AgentState) => agentOnDisk(ctx, agent);

async function board(): Promise<TaskBoard> {
  const read = await ctx.store.readTasks("alpha");
  if (read.kind !== "ok") throw new Error("no board");
  return read.value;
}

const startTask = (agent: AgentState, title: string) =>
  taskInProgress(lead.call, "ses_lead", title, { assignee: agent.agentId });

describe("stale sweep: misses and the grace period", () => {
  test("a fresh agent gets no miss and the server is not even asked", async () => {
    const agent = await worker();
    ctx.clock.advance(60 * S);
    const report = await sweeper.sweep();
    expect(report).toMatchObject({ checked: 1, stale: 0, misses: 0, serverReachable: undefined });
    expect((await state(agent)).consecutiveMisses).toBe(0);
    expect(ctx.server.calls).toEqual([]);
  });

  test("older than 60 s: one miss; at 2 misses inactive, tasks back to pending, leader notified", async () => {
    const agent = await worker({ name: "builder" });
    const taskId = await startTask(agent, "build it");
    ctx.clock.advance(61 * S);
    const first = await sweeper.sweep();
    expect(first.misses).toBe(1);
    expect(await state(agent)).toMatchObject({
      status: "active",
      consecutiveMisses: 1,
      lastMissAt: "2026-01-01T00:01:01.000Z",
    });
    expect(await leaderInbox(ctx)).toEqual([]);

    ctx.clock.advance(15 * S);
    const second = await sweeper.sweep();
    expect(second.inactive).toHaveLength(1);
    const after = await state(agent);
    expect(after).toMatchObject({
      status: "inactive",
      consecutiveMisses: 2,
      statusReason: "no heartbeat for 76 s (2 missed sweeps)",
    });
    const task = (await board()).tasks.find((t) => t.id === taskId);
    expect(task).toMatchObject({
      status: "pending",
      assignee: null,
      reassignedReason: "its owner became inactive",
    });

    const expected = `Agent builder (${agent.agentId}) became inactive: no heartbeat for 76 s (2 missed sweeps). Tasks returned to pending: ${taskId}.`;
    const inbox = await leaderInbox(ctx);
    expect(inbox).toHaveLength(1);
    expect(inbox[0]).toMatchObject({ type: "agent_inactive", to: lead.leaderId, text: expected });
    expect(inbox[0]?.deliveredAt).toBe("2026-01-01T00:01:16.000Z");
    expect(lead.leaderSession.prompts).toEqual([
      {
        text: expect.stringMatching(/^\[notice from opencode-teams via team alpha, id [0-9a-f-]+\]\n/),
        noReply: true,
      },
    ]);
    expect(lead.leaderSession.prompts[0]?.text.endsWith(`\n${expected}`)).toBe(true);
  });

  test("graceMisses is configurable", async () => {
    const strict = await makeTestContext({ graceMisses: 1 });
    try {
      await toolCaller(strict)("create-team", { teamName: "alpha" }, "ses_lead");
      const agent = await addAgent(strict, "alpha");
      strict.server.addSession({ id: agent.sessionId });
      strict.clock.advance(61 * S);
      expect((await new StaleSweeper(strict).sweep()).inactive).toHaveLength(1);
    } finally {
      await strict.cleanup();
    }
  });

  test("an agent without tasks is reported with 'none'", async () => {
    const agent = await worker({ name: "idler" });
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    ctx.clock.advance(15 * S);
    await sweeper.sweep();
    expect((await leaderInbox(ctx))[0]?.text).toBe(
      `Agent idler (${agent.agentId}) became inactive: no heartbeat for 76 s (2 missed sweeps). Tasks returned to pending: none.`,
    );
  });

  test("a heartbeat between two misses starts the count again", async () => {
    const agent = await worker();
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    // An event-style heartbeat: only the slot is written, the durable miss count stays 1 ...
    ctx.clock.advance(2 * S);
    const now = new Date(ctx.clock.now()).toISOString();
    ctx.store.writeHeartbeat(
      "alpha",
      agent.agentId,
      nextHeartbeat(undefined, now, "sdk_message", { event: true }),
    );
    // ... until the next sweep sees the fresh heartbeat and resets it.
    ctx.clock.advance(13 * S);
    const report = await sweeper.sweep();
    expect(report.reset).toBe(1);
    expect((await state(agent)).consecutiveMisses).toBe(0);
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    expect(await state(agent)).toMatchObject({ status: "active", consecutiveMisses: 1 });
  });

  test("a miss is counted again only if no heartbeat came after the last one", async () => {
    const agent = await worker();
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    // The heartbeat arrives and goes stale again before any sweep could reset the count.
    ctx.clock.advance(1 * S);
    const at = new Date(ctx.clock.now()).toISOString();
    ctx.store.writeHeartbeat("alpha", agent.agentId, nextHeartbeat(undefined, at, "tool", { event: true }));
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    expect(await state(agent)).toMatchObject({ status: "active", consecutiveMisses: 1 });
  });

  test("the tool heartbeat resets misses too", async () => {
    const agent = await worker();
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    await lead.call("heartbeat", { agentId: agent.agentId, teamName: "alpha" }, agent.sessionId);
    ctx.clock.advance(15 * S);
    await sweeper.sweep();
    expect(await state(agent)).toMatchObject({ status: "active", consecutiveMisses: 0 });
  });
});

describe("stale sweep: cost", () => {
  test("agents known to be fresh are not read again until they could be stale", async () => {
    const agents = [];
    for (let i = 0; i < 5; i++) agents.push(await worker({ name: `w${i}` }));
    expect((await sweeper.sweep()).read).toBe(6);
    ctx.clock.advance(30 * S);
    const second = await sweeper.sweep();
    // Only the leader was read once and set aside for good; the workers cannot be stale before 60 s.
    expect(second).toMatchObject({ read: 0, checked: 5 });
    // A heartbeat after the first read moves nothing earlier: staleness is still judged on the next read.
    await lead.call(
      "heartbeat",
      { agentId: agents[0]?.agentId, teamName: "alpha" },
      agents[0]?.sessionId ?? "",
    );
    ctx.clock.advance(31 * S);
    const third = await sweeper.sweep();
    expect(third).toMatchObject({ read: 5, stale: 4, misses: 4 });
    expect((await state(agents[0] as AgentState)).consecutiveMisses).toBe(0);
  });
});

describe("stale sweep: idempotent across sweepers", () => {
  test("two sweeps in one interval count one miss", async () => {
    const agent = await worker();
    ctx.clock.advance(61 * S);
    const other = new StaleSweeper(ctx);
    const reports = await Promise.all([sweeper.sweep(), other.sweep()]);
    expect(reports.map((r) => r.misses).sort()).toEqual([0, 1]);
    ctx.clock.advance(10 * S);
    expect((await other.sweep()).misses).toBe(0);
    expect((await state(agent)).consecutiveMisses).toBe(1);
  });

  test("two sweepers at the deadline: one transition, one notice, one history record", async () => {
    const agent = await worker();
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    ctx.clock.advance(15 * S);
    const other = new StaleSweeper(ctx);
    const reports = await Promise.all([sweeper.sweep(), other.sweep(), sweeper.sweep()]);
    expect(reports.map((r) => r.inactive.length).reduce((a, b) => a + b)).toBe(1);
    expect(await leaderInbox(ctx)).toHaveLength(1);
    expect(lead.leaderSession.prompts).toHaveLength(1);
    expect(await history()).toEqual([
      expect.objectContaining({ agent_id: agent.agentId, status: "interrupted" }),
    ]);
  });

  test("two processes sweeping the same files count each interval once", async () => {
    const agent = await worker({ name: "shared" });
    const script = path.join(import.meta.dir, "fixtures", "sweep-once.ts");
    const runPair = async (now: number, go: string) => {
      const goFile = path.join(ctx.projectRoot, go);
      const children = [0, 1].map(() =>
        Bun.spawn([process.execPath, script, ctx.store.paths.root, ctx.projectRoot, String(now), goFile], {
          stdout: "pipe",
          stderr: "inherit",
        }),
      );
      await Bun.sleep(150);
      await writeFile(goFile, "");
      const outputs = await Promise.all(children.map((child) => new Response(child.stdout).text()));
      return outputs.map((text) => JSON.parse(text) as { misses: number; inactive: number });
    };
    const start = ctx.clock.now();
    const first = await runPair(start + 61 * S, "go1");
    expect(first.map((r) => r.misses).sort()).toEqual([0, 1]);
    const second = await runPair(start + 76 * S, "go2");
    expect(second.map((r) => r.inactive).sort()).toEqual([0, 1]);
    expect(await state(agent)).toMatchObject({ status: "inactive", consecutiveMisses: 2 });
    expect(await leaderInbox(ctx)).toHaveLength(1);
    expect(await history()).toEqual([
      expect.objectContaining({ agent_id: agent.agentId, status: "interrupted" }),
    ]);
  });
});

describe("stale sweep: facts before verdicts", () => {
  test("busy session: heartbeat refreshed instead of a miss", async () => {
    const agent = await worker({}, "busy");
    ctx.clock.advance(61 * S);
    const report = await sweeper.sweep();
    expect(report).toMatchObject({ refreshed: 1, misses: 0 });
    const slot = await ctx.store.readHeartbeat("alpha", agent.agentId);
    expect(slot.record).toMatchObject({
      heartbeatTs: "2026-01-01T00:01:01.000Z",
      source: "sweep_busy_check",
    });
    expect(slot.record?.lastEventAt).toBeUndefined();
    expect(ctx.server.calls.filter((c) => c === "sessionStatuses")).toHaveLength(1);
    // No per-agent lookups for a busy session: the status map already proves it exists.
    expect(ctx.server.calls.filter((c) => c.startsWith("sessionExists"))).toEqual([]);
  });

  test("retry counts as busy", async () => {
    await worker({}, "retry");
    ctx.clock.advance(61 * S);
    expect((await sweeper.sweep()).refreshed).toBe(1);
  });

  test("busy with no event for longer than busyCapMs is stale all the same; its session is aborted", async () => {
    const agent = await worker({ name: "stuck" }, "busy");
    let refreshed = 0;
    // Every minute the sweep vouches for the busy session, up to the 10-minute cap.
    for (let minute = 0; minute < 10; minute++) {
      ctx.clock.advance(61 * S);
      refreshed += (await sweeper.sweep()).refreshed;
    }
    // 9 x 61 s = 549 s within the cap; at 610 s the cap is passed and the first miss is counted.
    expect(refreshed).toBe(9);
    expect(await state(agent)).toMatchObject({ status: "active", consecutiveMisses: 1 });
    ctx.clock.advance(15 * S);
    const report = await sweeper.sweep();
    expect(report.inactive).toHaveLength(1);
    expect((await state(agent)).statusReason).toMatch(
      /^its session has reported busy with no activity for \d+ s \(cap 600 s\)$/,
    );
    expect(ctx.server.calls).toContain(`abortSession ${agent.sessionId}`);
  });

  test("an event resets the busy cap", async () => {
    const agent = await worker({}, "busy");
    for (let minute = 0; minute < 9; minute++) {
      ctx.clock.advance(61 * S);
      await sweeper.sweep();
    }
    const at = new Date(ctx.clock.now()).toISOString();
    const slot = (await ctx.store.readHeartbeat("alpha", agent.agentId)).record;
    ctx.store.writeHeartbeat("alpha", agent.agentId, nextHeartbeat(slot, at, "sdk_message", { event: true }));
    for (let minute = 0; minute < 5; minute++) {
      ctx.clock.advance(61 * S);
      expect((await sweeper.sweep()).refreshed).toBe(1);
    }
    expect((await state(agent)).status).toBe("active");
  });

  test("session gone on the server: dead at once, no grace", async () => {
    const agent = await addAgent(ctx, "alpha", { name: "ghost" });
    const taskId = await startTask(agent, "haunt");
    ctx.clock.advance(61 * S);
    const report = await sweeper.sweep();
    expect(report.inactive).toHaveLength(1);
    expect(report.inactive[0]?.cause).toBe("session_gone");
    expect(await state(agent)).toMatchObject({
      status: "inactive",
      statusReason: `its OpenCode session ${agent.sessionId} no longer exists`,
    });
    expect((await leaderInbox(ctx))[0]?.text).toBe(
      `Agent ghost (${agent.agentId}) became inactive: its OpenCode session ${agent.sessionId} no longer exists. Tasks returned to pending: ${taskId}.`,
    );
  });

  test("tmux pane gone: dead at once", async () => {
    const agent = await worker({ paneId: "%42", tmux: { socket: "t", session: "s", window: "w" } });
    ctx.clock.advance(61 * S);
    const report = await sweeper.sweep();
    expect(report.inactive[0]).toMatchObject({ cause: "pane_gone", reason: "its tmux pane %42 is gone" });
    expect((await state(agent)).status).toBe("inactive");
  });

  test("tmux pane alive: an ordinary miss", async () => {
    const agentId = uuidv4();
    const pane = await ctx.tmux.openAgentPane(agentId, "t");
    const agent = await worker({ agentId, paneId: pane.paneId });
    ctx.clock.advance(61 * S);
    expect((await sweeper.sweep()).misses).toBe(1);
    expect((await state(agent)).status).toBe("active");
  });

  test("tmux state unknown: no verdict from it", async () => {
    ctx.tmux.installed = false;
    await worker({ paneId: "%42" });
    ctx.clock.advance(61 * S);
    expect((await sweeper.sweep()).misses).toBe(1);
  });

  test("server unreachable: misses count by age, but unreachability alone kills nobody", async () => {
    const agent = await worker();
    ctx.server.down = true;
    ctx.clock.advance(61 * S);
    const first = await sweeper.sweep();
    expect(first).toMatchObject({ misses: 1, serverReachable: false });
    expect(first.inactive).toEqual([]);
    ctx.clock.advance(15 * S);
    await sweeper.sweep();
    expect(await state(agent)).toMatchObject({
      status: "inactive",
      statusReason: `no heartbeat for 76 s (2 missed sweeps); the project's OpenCode server did not answer for its directory ${agent.cwd}`,
    });
  });

  test("server not running at all: same, and the reason says so", async () => {
    const agent = await worker();
    ctx.projectServerUp = false;
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    ctx.clock.advance(15 * S);
    await sweeper.sweep();
    expect((await state(agent)).statusReason).toBe(
      "no heartbeat for 76 s (2 missed sweeps); the project's OpenCode server is not running",
    );
  });
});

describe("stale sweep: who is swept", () => {
  test("the leader is never swept", async () => {
    ctx.clock.advance(3_600 * S);
    const report = await sweeper.sweep();
    expect(report.checked).toBe(0);
    const leader = await ctx.store.readAgent("alpha", lead.leaderId);
    expect(leader.kind === "ok" && leader.value.status).toBe("active");
  });

  test("terminated, inactive and shutting_down agents (their kill not overdue) are left alone", async () => {
    // The kill's caller is still waiting: its deadline is hours away.
    const deadline = new Date(ctx.clock.now() + 7_200 * S).toISOString();
    const agents = await Promise.all(
      (["terminated", "inactive", "shutting_down"] as const).map((status) =>
        worker({
          status,
          name: status,
          ...(status === "shutting_down" ? { shutdownDeadlineAt: deadline } : {}),
        }),
      ),
    );
    ctx.clock.advance(3_600 * S);
    await sweeper.sweep();
    await sweeper.sweep();
    for (const agent of agents) expect(await state(agent)).toEqual(agent);
  });

  test("spawning agents are swept like the rest", async () => {
    const agent = await worker({ status: "spawning" });
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    expect((await state(agent)).consecutiveMisses).toBe(1);
  });
});

describe("stale sweep: batching", () => {
  test("many agents at once: one board write, one notice with one line each, the runs recorded interrupted", async () => {
    const agents = [];
    for (let i = 0; i < 3; i++) agents.push(await worker({ name: `w${i}` }));
    const tasks = [
      await startTask(agents[0] as AgentState, "t0"),
      await startTask(agents[2] as AgentState, "t2"),
    ];
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    ctx.clock.advance(15 * S);
    const report = await sweeper.sweep();
    expect(report.inactive).toHaveLength(3);
    const inbox = await leaderInbox(ctx);
    expect(inbox).toHaveLength(1);
    const lines = (inbox[0]?.text ?? "").split("\n").sort();
    expect(lines).toEqual(
      agents
        .map(
          (a, i) =>
            `Agent w${i} (${a.agentId}) became inactive: no heartbeat for 76 s (2 missed sweeps). Tasks returned to pending: ${
              i === 0 ? tasks[0] : i === 2 ? tasks[1] : "none"
            }.`,
        )
        .sort(),
    );
    const entries = await history();
    expect(entries.map((e) => [e.name, e.status]).sort()).toEqual([
      ["w0", "interrupted"],
      ["w1", "interrupted"],
      ["w2", "interrupted"],
    ]);
  });

  test("the transitions are written into each agent file at once; the agent is refused further heartbeats", async () => {
    const agents = [];
    for (let i = 0; i < 3; i++) agents.push(await worker({ name: `w${i}` }));
    const onDisk = async (agent: AgentState) =>
      (JSON.parse(await readFile(ctx.store.paths.agentState("alpha", agent.agentId), "utf8")) as AgentState)
        .status;
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    ctx.clock.advance(15 * S);
    const report = await sweeper.sweep();
    expect(report.inactive).toHaveLength(3);
    for (const agent of agents) {
      expect(await onDisk(agent)).toBe("inactive");
      const beat = await lead.call<{ success: boolean; error?: string }>(
        "heartbeat",
        { teamName: "alpha", agentId: agent.agentId },
        agent.sessionId,
      );
      expect(beat).toMatchObject({
        success: false,
        error: expect.stringContaining("Agent is inactive: you were declared inactive"),
      });
    }
  });

  test("ServerInfo.activeSessions is recounted when agents go inactive", async () => {
    await recordServerInfo(ctx, 1, { activeSessions: 2 });
    await addAgent(ctx, "alpha", { name: "gone" });
    const alive = await worker({ name: "alive" });
    ctx.clock.advance(61 * S);
    await lead.call("heartbeat", { agentId: alive.agentId, teamName: "alpha" }, alive.sessionId);
    await sweeper.sweep();
    const info = ctx.store.paths.serverInfo(ctx.projectRoot);
    expect(JSON.parse(await Bun.file(info).text()).activeSessions).toBe(1);
  });

  test("a history that cannot be written is logged and changes nothing", async () => {
    const agent = await worker();
    // A directory where the history file should be: every read and write of it fails.
    await rm(ctx.store.paths.history("alpha"));
    await mkdir(ctx.store.paths.history("alpha"));
    ctx.server.sessions.delete(agent.sessionId);
    ctx.clock.advance(61 * S);
    expect((await sweeper.sweep()).inactive).toHaveLength(1);
    expect((await state(agent)).status).toBe("inactive");
    expect(await leaderInbox(ctx)).toHaveLength(1);
    expect(ctx.logs.some((l) => l.level === "warn" && l.message.includes("could not record"))).toBe(true);
  });

  test("reassignTasksOf leaves other agents' tasks alone", async () => {
    const a = await worker({ name: "a" });
    const b = await worker({ name: "b" });
    const ta = await startTask(a, "A");
    const tb = await startTask(b, "B");
    await reassignTasksOf(ctx, "alpha", [a.agentId], "x");
    const tasks = (await board()).tasks;
    expect(tasks.find((t) => t.id === ta)?.status).toBe("pending");
    expect(tasks.find((t) => t.id === tb)?.status).toBe("in_progress");
  });
});

describe("leader notices: delivery", () => {
  async function killOne(): Promise<AgentState> {
    const agent = await addAgent(ctx, "alpha");
    ctx.clock.advance(61 * S);
    await sweeper.sweep();
    return agent;
  }

  test("the leader's session on the project server is the fallback", async () => {
    ctx.local.sessions.delete("ses_lead");
    const onServer = ctx.server.addSession({ id: "ses_lead" });
    await killOne();
    expect(onServer.prompts).toHaveLength(1);
    expect(onServer.prompts[0]?.noReply).toBe(true);
  });

  test("undeliverable now: kept in the inbox and delivered by a later sweep, exactly once", async () => {
    ctx.local.sessions.delete("ses_lead");
    await killOne();
    const [pending] = await leaderInbox(ctx);
    expect(pending?.deliveredAt).toBeUndefined();
    // A later sweep in a process that has the leader's session delivers it.
    const later = ctx.local.addSession({ id: "ses_lead" });
    ctx.clock.advance(15 * S);
    const reports = await Promise.all([sweeper.sweep(), new StaleSweeper(ctx).sweep()]);
    expect(reports.map((r) => r.delivered).sort()).toEqual([0, 1]);
    expect(later.prompts).toHaveLength(1);
    expect((await leaderInbox(ctx))[0]?.deliveredAt).toBe("2026-01-01T00:01:16.000Z");
    await sweeper.sweep();
    await new StaleSweeper(ctx).sweep();
    expect(later.prompts).toHaveLength(1);
  });

  test("a failed delivery is retried", async () => {
    // Once at once, once more by the same sweep's retry pass.
    ctx.local.failPrompts = 2;
    await killOne();
    expect(lead.leaderSession.prompts).toHaveLength(0);
    ctx.clock.advance(15 * S);
    expect((await sweeper.sweep()).delivered).toBe(1);
    expect(lead.leaderSession.prompts).toHaveLength(1);
  });
});

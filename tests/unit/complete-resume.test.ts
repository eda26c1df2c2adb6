import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { enforceTimeouts } from "../../src/operations/liveness/timeouts.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leaderInbox, taskInProgress } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

const LEADER = "ses_leader";

interface Spawned {
  success: boolean;
  error?: string;
  agentId: string;
  sessionId: string;
  paneId?: string;
  name: string;
  status: string;
  warnings?: string[];
}

interface Resumed extends Spawned {
  resumedFrom: string;
  sessionReused: boolean;
  promptDelivery: string;
}

interface Completed {
  success: boolean;
  error?: string;
  agentId: string;
  name: string;
  status: string;
  reassignedTasks: string[];
  paneClosed: boolean;
  warnings?: string[];
}

interface HistoryResult {
  success: boolean;
  entries: {
    agent_id: string;
    status: string;
    summary?: string;
    reason?: string;
    resumes?: string;
    resumed_by?: string;
  }[];
  active: { agent_id: string }[];
  /** The most recent interrupted entry not yet resumed. */
  interrupted: { agent_id: string } | null;
}

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

async function setup(options: Record<string, unknown> = {}, teamArgs: Record<string, unknown> = {}) {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, ...options });
  call = toolCaller(ctx);
  const team = await createTeam(
    ctx,
    { teamName: "alpha", defaultModel: "mock/mock-model", ...teamArgs },
    LEADER,
  );
  if (!team.success) throw new Error(team.error);
}

beforeEach(() => setup());
afterEach(() => ctx.cleanup());

async function spawnOne(args: Record<string, unknown> = {}): Promise<Spawned> {
  const result = await call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "Build the parser", ...args },
    LEADER,
  );
  if (!result.success) throw new Error(result.error);
  return result;
}

async function agent(agentId: string): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agentId);
  if (read.kind !== "ok") throw new Error(`no agent ${agentId}`);
  return read.value;
}

const history = () => call<HistoryResult>("agent-history", { teamName: "alpha" }, LEADER);
const complete = (args: Record<string, unknown>, session: string) =>
  call<Completed>("complete-agent", { teamName: "alpha", status: "completed", ...args }, session);
const resume = (args: Record<string, unknown>, session = LEADER) =>
  call<Resumed>("resume-agent", { teamName: "alpha", ...args }, session);

/** Kill the agent's pane behind our back and let two sweeps find it. */
async function loseAgent(a: Spawned): Promise<void> {
  const pane = ctx.tmux.panes.get(a.paneId ?? "");
  if (!pane) throw new Error("no pane");
  pane.alive = false;
  const sweeper = new StaleSweeper(ctx);
  await sweeper.sweep();
  await sweeper.sweep();
  expect((await agent(a.agentId)).status).toBe("inactive");
}

describe("complete-agent", () => {
  test("the agent itself: history completed with its summary, leader notified, terminated, pane closed, tasks back", async () => {
    const a = await spawnOne();
    const task = await taskInProgress(call, LEADER, "parser", { sessionId: a.sessionId });
    const result = await complete({ agentId: a.agentId, summary: "parser done, 12 tests" }, a.sessionId);
    expect(result.success).toBe(true);
    expect(result.status).toBe("completed");
    expect(result.paneClosed).toBe(true);
    expect(result.reassignedTasks).toEqual([task]);

    const state = await agent(a.agentId);
    expect(state.status).toBe("terminated");
    expect(state.outcome).toBe("completed");
    expect(ctx.tmux.panes.get(a.paneId ?? "")?.alive).toBe(false);
    // Its own turn is neither aborted nor interrupted through its pane: it is the one making this call.
    expect(ctx.server.calls).not.toContain(`abortSession ${a.sessionId}`);
    expect(ctx.tmux.closedWithoutInterrupt).toEqual([a.paneId ?? ""]);

    const entry = (await history()).entries.find((e) => e.agent_id === a.agentId);
    expect(entry?.status).toBe("completed");
    expect(entry?.summary).toBe("parser done, 12 tests");

    const notices = (await leaderInbox(ctx)).filter((m) => m.type === "agent_completed");
    expect(notices).toHaveLength(1);
    expect(notices[0]?.text).toContain("parser done, 12 tests");
  });

  test("a sweep that runs while the pane is closing does not turn the completion into an interruption", async () => {
    const a = await spawnOne();
    const sweeper = new StaleSweeper(ctx);
    await sweeper.sweep();
    const close = ctx.tmux.closePane.bind(ctx.tmux);
    ctx.tmux.closePane = async (ref, options) => {
      await close(ref, options);
      ctx.clock.advance(ctx.options.sweepIntervalMs);
      await sweeper.sweep();
    };
    expect((await complete({ agentId: a.agentId, summary: "done" }, a.sessionId)).success).toBe(true);
    expect((await history()).entries.find((e) => e.agent_id === a.agentId)?.status).toBe("completed");
    expect((await leaderInbox(ctx)).map((m) => m.type)).toEqual(["agent_completed"]);
  });

  test("failed, reported by the leader: aborted, no notice to itself, recorded failed", async () => {
    const a = await spawnOne();
    const result = await complete({ agentId: a.agentId, status: "failed", summary: "no access" }, LEADER);
    expect(result.success).toBe(true);
    expect((await agent(a.agentId)).outcome).toBe("failed");
    expect(ctx.server.calls).toContain(`abortSession ${a.sessionId}`);
    expect((await history()).entries.find((e) => e.agent_id === a.agentId)?.status).toBe("failed");
    expect((await leaderInbox(ctx)).filter((m) => m.type === "agent_failed")).toHaveLength(0);
  });

  test("a team that keeps panes keeps the pane open", async () => {
    await ctx.cleanup();
    await setup({}, { teamName: "alpha", keepPanes: true });
    const team = await ctx.store.readTeam("alpha");
    if (team.kind !== "ok" || !team.value.keepPanes) {
      // create-team has no keepPanes argument: set it as a user editing config.json would.
      await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, keepPanes: true } : undefined));
    }
    const a = await spawnOne();
    const result = await complete({ agentId: a.agentId }, a.sessionId);
    expect(result.paneClosed).toBe(false);
    expect(ctx.tmux.panes.get(a.paneId ?? "")?.alive).toBe(true);
    expect((await agent(a.agentId)).status).toBe("terminated");
  });

  test("refusals change nothing", async () => {
    const a = await spawnOne();
    const b = await spawnOne();
    const before = await agent(a.agentId);
    expect((await complete({ agentId: a.agentId }, b.sessionId)).error).toBe(
      `Agent '${a.agentId}' does not belong to this session`,
    );
    expect((await complete({ agentId: a.agentId }, "ses_stranger")).error).toBe(
      `Agent '${a.agentId}' does not belong to this session`,
    );
    expect((await complete({ agentId: "../x" }, a.sessionId)).success).toBe(false);
    // The tool's schema refuses it before the operation runs, as OpenCode does.
    await expect(complete({ agentId: a.agentId, summary: "x".repeat(5_000) }, a.sessionId)).rejects.toThrow();
    expect(await agent(a.agentId)).toEqual(before);

    expect((await complete({ agentId: a.agentId }, a.sessionId)).success).toBe(true);
    const again = await complete({ agentId: a.agentId }, LEADER);
    expect(again.error).toContain("already ended (completed)");
  });

  test("an inactive agent cannot be completed: it was interrupted", async () => {
    const a = await spawnOne();
    await loseAgent(a);
    const result = await complete({ agentId: a.agentId }, LEADER);
    expect(result.error).toContain("is inactive");
  });
});

describe("an agent that completes while it is being spawned", () => {
  test("its pane, opened after the prompt, is closed and the spawn still succeeds", async () => {
    const prompt = ctx.server.promptAsync.bind(ctx.server);
    let completedBy: string | undefined;
    ctx.server.promptAsync = async (sessionId, text, options) => {
      await prompt(sessionId, text, options);
      // A very fast model: done before spawn-agent even opened the pane.
      const views = (await ctx.store.listAgentViews("alpha")).items;
      const self = views.find((v) => v.state.sessionId === sessionId);
      if (self) {
        completedBy = self.state.agentId;
        await complete({ agentId: self.state.agentId, summary: "quick" }, sessionId);
      }
    };
    const a = await spawnOne();
    expect(a.agentId).toBe(completedBy ?? "");
    expect(ctx.tmux.panes.get(a.paneId ?? "")?.alive).toBe(false);
    const state = await agent(a.agentId);
    expect(state).toMatchObject({ status: "terminated", outcome: "completed", paneId: a.paneId });
    const entries = (await history()).entries.filter((e) => e.agent_id === a.agentId);
    expect(entries.map((e) => e.status)).toEqual(["completed"]);
    expect(entries[0]?.reason).toContain("quick");
  });
});

describe("inactive agents are interrupted in the history", () => {
  test("one history write marks every agent of a sweep batch interrupted", async () => {
    const a = await spawnOne();
    const b = await spawnOne();
    for (const s of [a, b]) {
      const pane = ctx.tmux.panes.get(s.paneId ?? "");
      if (pane) pane.alive = false;
    }
    const sweeper = new StaleSweeper(ctx);
    await sweeper.sweep();
    await sweeper.sweep();
    const h = await history();
    for (const s of [a, b]) {
      const entry = h.entries.find((e) => e.agent_id === s.agentId);
      expect(entry?.status).toBe("interrupted");
      expect(entry?.reason).toBeTruthy();
    }
    expect([a.agentId, b.agentId]).toContain(h.interrupted?.agent_id ?? "none");
  });
});

describe("resume-agent", () => {
  test("an inactive agent continues on its old session in a fresh pane; history links both runs", async () => {
    const a = await spawnOne({ timeoutMinutes: 30 });
    await loseAgent(a);
    const oldPane = a.paneId;
    const result = await resume({ agentId: a.agentId });
    expect(result.success).toBe(true);
    expect(result.resumedFrom).toBe(a.agentId);
    expect(result.sessionReused).toBe(true);
    expect(result.sessionId).toBe(a.sessionId);
    expect(result.agentId).not.toBe(a.agentId);
    expect(result.name).toBe(a.name);
    expect(result.status).toBe("active");
    expect(result.paneId).toBeDefined();
    expect(result.paneId).not.toBe(oldPane);

    const next = await agent(result.agentId);
    expect(next.resumes).toBe(a.agentId);
    expect(next.prompt).toBe("Build the parser");
    expect(next.timeoutMinutes).toBe(30);
    const old = await agent(a.agentId);
    expect(old.status).toBe("terminated");
    expect(old.outcome).toBe("interrupted");

    // The continuation went to the old session, which had the original prompt already.
    const prompts = ctx.server.sessions.get(a.sessionId)?.prompts.map((p) => p.text) ?? [];
    expect(prompts[0]).toBe("Build the parser");
    expect(prompts[1]).toContain("interrupted");
    expect(prompts[1]).toContain(`Your agent id is now ${result.agentId} (it was ${a.agentId})`);

    const h = await history();
    const oldEntry = h.entries.find((e) => e.agent_id === a.agentId);
    expect(oldEntry?.status).toBe("resumed");
    expect(oldEntry?.resumed_by).toBe(result.agentId);
    const newEntry = h.entries.find((e) => e.agent_id === result.agentId);
    expect(newEntry?.status).toBe("spawned");
    expect(newEntry?.resumes).toBe(a.agentId);
    expect(h.interrupted).toBeNull();
    expect(h.active.map((e) => e.agent_id)).toEqual([result.agentId]);

    // The session's calls now belong to the new record: it can heartbeat and complete.
    const beat = await call<{ success: boolean }>(
      "heartbeat",
      { teamName: "alpha", agentId: result.agentId },
      a.sessionId,
    );
    expect(beat.success).toBe(true);
    // Quoting its old id (from earlier in its conversation) gets told which id is its own now.
    expect((await complete({ agentId: a.agentId }, a.sessionId)).error).toContain(
      `this session now belongs to agent '${result.agentId}' (resumed): use that agentId`,
    );
    expect((await complete({ agentId: result.agentId }, a.sessionId)).success).toBe(true);
  });

  test("a force-killed agent whose session is gone restarts on a new session with its original prompt", async () => {
    const a = await spawnOne();
    const kill = await call<{ success: boolean }>(
      "kill-agent",
      { teamName: "alpha", agentId: a.agentId, force: true },
      LEADER,
    );
    expect(kill.success).toBe(true);
    ctx.server.sessions.delete(a.sessionId);
    const result = await resume({ agentId: a.agentId, prompt: "Pick up at step 3." });
    expect(result.success).toBe(true);
    expect(result.sessionReused).toBe(false);
    expect(result.sessionId).not.toBe(a.sessionId);
    expect(result.warnings?.join(" ")).toContain("no longer exists");
    const prompts = ctx.server.sessions.get(result.sessionId)?.prompts.map((p) => p.text) ?? [];
    expect(prompts).toEqual(["Build the parser\n\nPick up at step 3."]);
  });

  test("refuses what cannot be resumed, and changes nothing", async () => {
    const a = await spawnOne();
    expect((await resume({ agentId: a.agentId })).error).toContain("is active, not interrupted");
    expect((await resume({ agentId: a.agentId }, a.sessionId)).error).toBe(
      "Only the team leader can resume agents",
    );
    expect((await resume({ agentId: "not-a-uuid" })).success).toBe(false);

    await complete({ agentId: a.agentId }, a.sessionId);
    expect((await resume({ agentId: a.agentId })).error).toContain("ended as completed");

    const b = await spawnOne();
    await loseAgent(b);
    const first = await resume({ agentId: b.agentId });
    expect(first.success).toBe(true);
    const agentsBefore = (await ctx.store.listAgentViews("alpha")).items.length;
    expect((await resume({ agentId: b.agentId })).error).toContain("was already resumed");
    expect((await ctx.store.listAgentViews("alpha")).items.length).toBe(agentsBefore);
  });
});

describe("timeoutMinutes", () => {
  test("an agent past its limit is stopped, its tasks handed back, history timeout, leader told; then resumable", async () => {
    const a = await spawnOne({ timeoutMinutes: 1 });
    const b = await spawnOne();
    const task = await taskInProgress(call, LEADER, "slow", { sessionId: a.sessionId });
    ctx.clock.advance(59_000);
    expect(await enforceTimeouts(ctx)).toBe(0);
    ctx.clock.advance(2_000);
    expect(await enforceTimeouts(ctx)).toBe(1);
    // A second process doing the same finds nothing left to do.
    expect(await enforceTimeouts(ctx)).toBe(0);

    const state = await agent(a.agentId);
    expect(state.status).toBe("terminated");
    expect(state.outcome).toBe("timeout");
    expect((await agent(b.agentId)).status).toBe("active");
    const tasks = await call<{ tasks: { id: string; status: string; owner?: string }[] }>(
      "list-tasks",
      { teamName: "alpha" },
      LEADER,
    );
    expect(tasks.tasks.find((t) => t.id === task)?.status).toBe("pending");
    expect((await history()).entries.find((e) => e.agent_id === a.agentId)?.status).toBe("timeout");
    const notices = (await leaderInbox(ctx)).filter((m) => m.type === "agent_timeout");
    expect(notices).toHaveLength(1);
    expect(notices[0]?.text).toContain("timed out after 1 minute");

    const resumed = await resume({ agentId: a.agentId });
    expect(resumed.success).toBe(true);
  });
});

describe("messages across a run's end", () => {
  test("complete-agent's report reaches the leader's session in the completion notice", async () => {
    const a = await spawnOne();
    const leader = ctx.local.addSession({ id: LEADER });
    const report = `Found 2 bugs:\n- a\n- b\n${"detail ".repeat(100)}`;
    expect((await complete({ agentId: a.agentId, summary: "2 bugs", report }, a.sessionId)).success).toBe(
      true,
    );
    expect(leader.prompts).toHaveLength(1);
    // The report is quoted line by line (specs/send-message.md, "The text the recipient's model reads").
    const quoted = report
      .trim()
      .split("\n")
      .map((line) => `> ${line}`)
      .join("\n");
    expect(leader.prompts[0]?.text).toContain(`completed: 2 bugs\nReport from ${a.name}:\n${quoted}`);
    const tooLong = await spawnOne({ name: "verbose" });
    const refused = await complete(
      { agentId: tooLong.agentId, report: "x".repeat(16 * 1024 + 1) },
      tooLong.sessionId,
    );
    expect(refused).toMatchObject({ success: false, error: expect.stringContaining("keep it under 16384") });
    expect((await agent(tooLong.agentId)).status).toBe("active");
  });

  test("messages stored while an agent was stopped are handed over by resume-agent, once", async () => {
    const a = await spawnOne();
    await loseAgent(a);
    const sent = await call<{ success: boolean; deliveries: { delivery: string }[] }>(
      "send-message",
      { teamName: "alpha", to: a.name, message: "the API changed: use v2" },
      LEADER,
    );
    expect(sent.deliveries).toEqual([expect.objectContaining({ delivery: "stored" })]);
    const result = await resume({ agentId: a.agentId });
    expect(result.success).toBe(true);
    const prompts = ctx.server.sessions.get(a.sessionId)?.prompts.map((p) => p.text) ?? [];
    const continuation = prompts[prompts.length - 1] ?? "";
    expect(continuation).toContain(
      "Messages that reached your inbox while you were stopped (1, oldest first):",
    );
    expect(continuation).toContain("[message from leader (leader) via team alpha, id ");
    expect(continuation).toContain("the API changed: use v2");
    const [stored] = (await ctx.store.readInbox("alpha", a.agentId)).items;
    expect(stored?.deliveredAt).toBeDefined();
    // The resumed run reads it in its own inbox (its earlier run's), and no sweep sends it again.
    await new StaleSweeper(ctx).sweep();
    const after = ctx.server.sessions.get(a.sessionId)?.prompts ?? [];
    expect(after.filter((p) => p.text.includes("use v2"))).toHaveLength(1);
    const read = await call<{ messages: { text: string }[] }>(
      "read-messages",
      { teamName: "alpha" },
      a.sessionId,
    );
    expect(read.messages.map((m) => m.text)).toEqual(["the API changed: use v2"]);
  });
});

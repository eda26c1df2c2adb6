/**
 * A damaged agent file must not hide a running agent: listings show it with a lifecycle status from the contract (its
 * last known, else `inactive`), health `error` and a warning on every call, and kill-agent ends it (its marked pane closed, its session aborted, its tasks handed back, its color released, its end
 * in the history). Unit level with fakes, plus the tmux lookup by `@agent_id` against real tmux on a private socket.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { readFile, writeFile } from "node:fs/promises";
import { collectStatus } from "../../src/cli/status.ts";
import { TmuxCli } from "../../src/edges/tmux.ts";
import type { KillAgentOutput } from "../../src/operations/agents/kill.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { ColorPoolSchema } from "../../src/state/color-store.ts";
import { readJson } from "../../src/state/store.ts";
import { hasTmux, killServer, tmuxSocketName } from "../e2e/harness/tmux.ts";
import { removeSocketFile } from "../e2e/tmux-socket-file.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext, taskInProgress } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";

interface Listing {
  agent_id: string;
  lifecycle_status: string;
  health_status: string;
  session_id?: string | null;
  metadata: Record<string, unknown>;
  [key: string]: unknown;
}

let ctx: TestContext;
let call: ToolCall;

beforeEach(
  async () =>
    ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0, shutdownTimeoutMs: 500 })),
);
afterEach(() => ctx.cleanup());

/** A running agent (busy session, pane) holding one in_progress task. */
async function runningAgentWithTask() {
  const spawned = await call<{ success: boolean; agentId: string; sessionId: string; paneId: string }>(
    "spawn-agent",
    { teamName: "alpha", prompt: "Build the parser", name: "builder" },
    LEADER,
  );
  if (!spawned.success) throw new Error(JSON.stringify(spawned));
  const taskId = await taskInProgress(call, LEADER, "parser", { sessionId: spawned.sessionId });
  const session = ctx.server.sessions.get(spawned.sessionId);
  if (!session) throw new Error("no session");
  session.activity = "busy";
  return { ...spawned, taskId };
}

const agentPath = (agentId: string) => ctx.store.paths.agentState("alpha", agentId);

/** The task as the store reads the board: tasks.json with its journal of status changes replayed. */
async function taskOf(taskId: string) {
  const board = await ctx.store.readTasks("alpha");
  if (board.kind !== "ok") throw new Error(`board is ${board.kind}`);
  return board.value.tasks.find((task) => task.id === taskId);
}

async function historyOf(agentId: string) {
  const history = JSON.parse(await readFile(ctx.store.paths.history("alpha"), "utf8")) as {
    entries: { agent_id: string; status: string }[];
  };
  return history.entries.filter((entry) => entry.agent_id === agentId);
}

async function heldColor(agentId: string) {
  const pool = await readJson(ctx.store.paths.colorPool, ColorPoolSchema);
  if (pool.kind !== "ok") throw new Error("no color pool");
  return pool.value.assignments.find((a) => a.agentId === agentId && !a.releasedAt);
}

/** Every key path of a value, so two listings can be compared for the same key set. */
function keyPaths(value: unknown, prefix = ""): string[] {
  if (!value || typeof value !== "object" || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([key, inner]) =>
    key === "metrics" ? [`${prefix}.${key}`] : keyPaths(inner, `${prefix}.${key}`),
  );
}

describe("a damaged agent file", () => {
  test("shows the agent as inactive with health error in every listing, every time, and kill-agent ends it", async () => {
    const agent = await runningAgentWithTask();
    await writeFile(agentPath(agent.agentId), '{"version": 1, "agentId": \u0000 garbage');

    for (let round = 1; round <= 2; round++) {
      const listed = await call<{ agents: Listing[]; warnings?: string[] }>(
        "list-agents",
        { teamName: "alpha", grouped: false },
        LEADER,
      );
      const shown = listed.agents.find((a) => a.agent_id === agent.agentId);
      // Nothing of its status survived: the contract's status for an agent not known to run, never "unknown".
      expect(shown?.lifecycle_status).toBe("inactive");
      expect(shown?.health_status).toBe("error");
      expect(String((shown?.state as { error?: string } | undefined)?.error)).toMatch(/damaged.*kill-agent/s);
      expect(listed.warnings?.some((w) => w.includes(agent.agentId) && w.includes("kill-agent"))).toBe(true);
      // The same keys as any other agent, null where unknown.
      const leader = listed.agents.find((a) => a.agent_id !== agent.agentId);
      expect(keyPaths(shown).sort()).toEqual(keyPaths(leader).sort());

      const all = await call<{ agents: { agentId: string; status: string }[]; warnings?: string[] }>(
        "get-agent-status",
        { teamName: "alpha" },
        LEADER,
      );
      expect(all.agents.find((a) => a.agentId === agent.agentId)?.status).toBe("inactive");
      expect(all.warnings?.some((w) => w.includes(agent.agentId))).toBe(true);

      const one = await call<{ success: boolean; agents: { status: string }[]; warnings?: string[] }>(
        "get-agent-status",
        { teamName: "alpha", agentId: agent.agentId },
        LEADER,
      );
      expect(one.success).toBe(true);
      expect(one.agents.map((a) => a.status)).toEqual(["inactive"]);
      expect(one.warnings?.some((w) => w.includes(agent.agentId))).toBe(true);

      const table = await collectStatus(ctx, "alpha", false);
      const row = table.agents.find((r) => r.agentId === agent.agentId);
      expect(row).toMatchObject({
        name: "builder",
        status: "inactive",
        health: "error",
        tasks: [agent.taskId],
      });
      expect(table.warnings.some((w) => w.includes(agent.agentId))).toBe(true);
    }

    const killed = await call<KillAgentOutput & { success: boolean; error?: string }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId },
      LEADER,
    );
    expect(killed.error).toBeUndefined();
    expect(killed).toMatchObject({ success: true, method: "force", phase: "unreadable" });
    expect(killed.reassignedTasks).toEqual([agent.taskId]);
    expect(killed.warnings?.some((w) => w.includes("graceful"))).toBe(true);
    // Its pane closed, its session aborted, its task back on the board, its color free, its end in the history.
    expect(ctx.tmux.panes.get(agent.paneId)?.alive).toBe(false);
    expect(ctx.server.calls).toContain(`abortSession ${agent.sessionId}`);
    expect(ctx.server.sessions.get(agent.sessionId)?.activity).toBe("idle");
    expect(await taskOf(agent.taskId)).toMatchObject({ status: "pending", assignee: null });
    expect(await heldColor(agent.agentId)).toBeUndefined();
    expect((await historyOf(agent.agentId)).map((e) => e.status)).toEqual(["interrupted"]);

    // Listings are clean again: a terminated agent, no warning.
    const after = await call<{ agents: Listing[]; warnings?: string[] }>(
      "list-agents",
      { teamName: "alpha", grouped: false },
      LEADER,
    );
    expect(after.agents.find((a) => a.agent_id === agent.agentId)?.lifecycle_status).toBe("terminated");
    expect(after.warnings).toBeUndefined();

    const again = await call<{ success: boolean; error?: string }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId, force: true },
      LEADER,
    );
    expect(again.success).toBe(false);
    expect(again.error).toContain("already terminated");
  });

  /** Torn mid-write: the tail is lost, the fields before it are as written. */
  async function tearAgentFile(agentId: string) {
    const text = await readFile(agentPath(agentId), "utf8");
    await writeFile(agentPath(agentId), text.slice(0, text.indexOf('"cwd"')));
  }

  test("kill-agent ends it at once, from a torn file, and never touches a pane without its mark", async () => {
    const agent = await runningAgentWithTask();
    await tearAgentFile(agent.agentId);
    // The user closed the agent's pane; tmux reused its id for a pane of their own.
    const own = ctx.tmux.panes.get(agent.paneId);
    if (!own) throw new Error("no pane");
    ctx.tmux.panes.set(agent.paneId, { ...own, alive: true, spec: { ...own.spec, options: {} } });

    const killed = await call<{ success: boolean; error?: string; reassignedTasks: string[] }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId, force: true },
      LEADER,
    );
    expect(killed.error).toBeUndefined();
    expect(killed.reassignedTasks).toEqual([agent.taskId]);
    // The session the torn file still names is aborted; the user's pane is left alone.
    expect(ctx.server.calls).toContain(`abortSession ${agent.sessionId}`);
    expect(ctx.tmux.panes.get(agent.paneId)?.alive).toBe(true);
  });

  test("a torn file's listing shows what it still says", async () => {
    const agent = await runningAgentWithTask();
    await tearAgentFile(agent.agentId);
    const listed = await call<{ agents: Listing[] }>(
      "list-agents",
      { teamName: "alpha", grouped: false },
      LEADER,
    );
    const shown = listed.agents.find((a) => a.agent_id === agent.agentId);
    expect(shown?.metadata).toMatchObject({
      session_id: agent.sessionId,
      model: "mock/mock-model",
      pane_id: agent.paneId,
    });
  });

  test("a torn file keeps the status it still says, counted under it, with health error", async () => {
    const agent = await runningAgentWithTask();
    await tearAgentFile(agent.agentId);
    type Listed = { agents: Listing[]; summary: { total: number; by_status: object; by_health: object } };
    const listed = await call<Listed>("list-agents", { teamName: "alpha", grouped: false }, LEADER);
    const shown = listed.agents.find((a) => a.agent_id === agent.agentId);
    expect(shown).toMatchObject({ lifecycle_status: "active", health_status: "error" });
    expect(String((shown?.state as { error?: string } | undefined)?.error)).toContain("last known status");
    expect(listed.summary.by_status).toEqual({ active: 2 });
    expect(listed.summary.by_health).toMatchObject({ error: 1 });
    const filtered = await call<Listed>(
      "list-agents",
      { teamName: "alpha", grouped: false, statusFilter: "active", healthFilter: "error" },
      LEADER,
    );
    expect(filtered.agents.map((a) => a.agent_id)).toEqual([agent.agentId]);
    const grouped = await call<{ agents: Record<string, Listing[]> }>(
      "list-agents",
      { teamName: "alpha" },
      LEADER,
    );
    expect(Object.keys(grouped.agents)).toEqual(["active"]);

    const status = await call<{
      agents: { agentId: string; status: string; lastError?: string }[];
      summary: object;
    }>("get-agent-status", { teamName: "alpha", agentId: agent.agentId }, LEADER);
    expect(status.agents[0]).toMatchObject({ status: "active" });
    expect(status.agents[0]?.lastError).toContain("kill-agent");
    expect(status.summary).toMatchObject({ total: 1, active: 1 });
  });

  test("a stray <uuid>.json that was never a member and says nothing is skipped with a warning, never listed", async () => {
    await runningAgentWithTask();
    const stray = "7d5c1f0e-2b3a-4c8d-9e6f-1a2b3c4d5e6f";
    await writeFile(agentPath(stray), "\u0000\u0000 not an agent");
    for (let round = 1; round <= 2; round++) {
      const listed = await call<{ agents: Listing[]; summary: { total: number }; warnings?: string[] }>(
        "list-agents",
        { teamName: "alpha", grouped: false },
        LEADER,
      );
      expect(listed.agents.map((a) => a.agent_id)).not.toContain(stray);
      expect(listed.summary.total).toBe(2);
      expect(listed.warnings?.some((w) => w.includes(stray) && w.startsWith("Skipped"))).toBe(true);

      const all = await call<{
        agents: { agentId: string }[];
        summary: { total: number };
        warnings?: string[];
      }>("get-agent-status", { teamName: "alpha" }, LEADER);
      expect(all.agents.map((a) => a.agentId)).not.toContain(stray);
      expect(all.summary.total).toBe(2);
      expect(all.warnings?.some((w) => w.includes(stray) && w.startsWith("Skipped"))).toBe(true);
      const one = await call<{ success: boolean; error?: string }>(
        "get-agent-status",
        { teamName: "alpha", agentId: stray },
        LEADER,
      );
      expect(one.success).toBe(false);
      expect(one.error).toContain("not found");

      const table = await collectStatus(ctx, "alpha", false);
      expect(table.agents.map((r) => r.agentId)).not.toContain(stray);
      expect(table.warnings.some((w) => w.includes(stray))).toBe(true);
    }
  });

  test("the sweep neither throws nor repeats itself over it", async () => {
    const agent = await runningAgentWithTask();
    await writeFile(agentPath(agent.agentId), "not json");
    const sweeper = new StaleSweeper(ctx);
    for (let round = 0; round < 3; round++) {
      const before = ctx.logs.length;
      await sweeper.sweep();
      const warned = ctx.logs.slice(before).filter((l) => l.message.includes(agent.agentId));
      expect(warned.length).toBeLessThanOrEqual(1);
    }
  });
});

describe.skipIf(!hasTmux())("findAgentPane on real tmux", () => {
  let socket: string;
  const cli = new TmuxCli();
  beforeAll(() => {
    socket = tmuxSocketName("oct-unknown");
  });
  afterAll(() => {
    killServer(socket);
    removeSocketFile(socket);
  });

  test("finds the pane by its @agent_id mark only, with its session option", async () => {
    const agentId = "0b7c8a52-3f4e-4b8a-9a51-6d3c2e1f0a99";
    expect(await cli.findAgentPane(socket, agentId)).toBeUndefined(); // no server yet
    const base = { socket, session: "teams-alpha", window: "team-alpha", cwd: "/", title: "t" };
    await cli.openPane({ ...base, command: ["sleep", "300"], options: { agent_id: "someone-else" } });
    const ours = await cli.openPane({
      ...base,
      command: ["sleep", "300"],
      options: { agent_id: agentId, opencode_session_id: "ses_abc" },
    });
    expect(await cli.findAgentPane(socket, agentId)).toEqual({
      paneId: ours.paneId,
      panePid: ours.panePid,
      sessionId: "ses_abc",
    });
    await cli.closePane({ socket, paneId: ours.paneId, agentId });
    expect(await cli.findAgentPane(socket, agentId)).toBeUndefined();
  });
});

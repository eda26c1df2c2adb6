import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readdir, writeFile } from "node:fs/promises";
import { v4 as uuidv4 } from "uuid";
import {
  enforceMaxEntries,
  readHistory,
  recordEnded,
  recordSpawned,
} from "../../src/operations/history/history.ts";
import type { HistoryEntry } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

beforeEach(async () => {
  ctx = await makeTestContext({ historyMaxEntries: 5 });
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

function entry(
  status: HistoryEntry["status"],
  minute: number,
  extra: Partial<HistoryEntry> = {},
): HistoryEntry {
  return {
    agent_id: uuidv4(),
    agent_type: "worker",
    task_description: `task at ${minute}`,
    timestamp: new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString(),
    status,
    completion_timestamp:
      status === "spawned" ? null : new Date(Date.UTC(2026, 0, 1, 1, minute)).toISOString(),
    ...extra,
  };
}

describe("max entries (specs/agent-history.md rule)", () => {
  test("the oldest completed or failed entry goes first", () => {
    const entries = [
      entry("spawned", 1),
      entry("failed", 2),
      entry("completed", 3),
      entry("resumed", 0),
      entry("interrupted", 4),
    ];
    const kept = enforceMaxEntries(entries, 4);
    expect(kept.map((e) => e.task_description)).toEqual(["task at 1", "task at 3", "task at 0", "task at 4"]);
  });

  test("then the oldest interrupted entry that was resumed", () => {
    const entries = [entry("resumed", 5), entry("spawned", 1), entry("resumed", 2), entry("interrupted", 3)];
    expect(enforceMaxEntries(entries, 3).map((e) => e.task_description)).toEqual([
      "task at 5",
      "task at 1",
      "task at 3",
    ]);
  });

  test("spawned, unresumed interrupted and timed-out entries are never evicted", () => {
    const entries = [
      entry("spawned", 1),
      entry("interrupted", 2),
      entry("timeout", 3),
      entry("completed", 4),
    ];
    const kept = enforceMaxEntries(entries, 2);
    expect(kept.map((e) => e.status)).toEqual(["spawned", "interrupted", "timeout"]);
  });

  test("recording past max_entries keeps the file bounded in the spec's order", async () => {
    for (let i = 0; i < 8; i++) {
      ctx.clock.advance(60_000);
      const agent = await addAgent(ctx, "alpha", { name: `w${i}`, prompt: `job ${i}` });
      await recordSpawned(ctx, agent);
      if (i < 6) await recordEnded(ctx, "alpha", agent.agentId, i % 2 === 0 ? "completed" : "failed");
    }
    const { history } = await readHistory(ctx, "alpha");
    expect(history.max_entries).toBe(5);
    expect(history.entries).toHaveLength(5);
    // Finished runs 0-2 were evicted oldest first; both running ones stay.
    expect(history.entries.map((e) => e.name)).toEqual(["w3", "w4", "w5", "w6", "w7"]);
  });
});

describe("lifecycle transitions", () => {
  test("spawned -> completed records the outcome once", async () => {
    const agent = await addAgent(ctx, "alpha");
    await recordSpawned(ctx, agent);
    ctx.clock.advance(5_000);
    await recordEnded(ctx, "alpha", agent.agentId, "completed", { summary: "all done" });
    await recordEnded(ctx, "alpha", agent.agentId, "failed");
    const { history } = await readHistory(ctx, "alpha");
    expect(history.entries).toEqual([
      expect.objectContaining({
        agent_id: agent.agentId,
        status: "completed",
        summary: "all done",
        agent_type: "worker",
      }),
    ]);
    expect(history.entries[0]?.completion_timestamp).toBe(new Date(ctx.clock.now()).toISOString());
  });

  test.each(["failed", "interrupted", "timeout"] as const)("spawned -> %s", async (status) => {
    const agent = await addAgent(ctx, "alpha");
    await recordSpawned(ctx, agent);
    await recordEnded(ctx, "alpha", agent.agentId, status, { reason: "why" });
    const { history } = await readHistory(ctx, "alpha");
    expect(history.entries[0]).toMatchObject({ status, reason: "why" });
  });

  test("interrupted -> resumed links both ends, and the new run can complete", async () => {
    const old = await addAgent(ctx, "alpha", { name: "w" });
    await recordSpawned(ctx, old);
    await recordEnded(ctx, "alpha", old.agentId, "interrupted");
    const next = await addAgent(ctx, "alpha", { name: "w", resumes: old.agentId, sessionId: old.sessionId });
    await recordSpawned(ctx, next);
    await recordEnded(ctx, "alpha", next.agentId, "completed");
    const { history } = await readHistory(ctx, "alpha");
    expect(history.entries).toEqual([
      expect.objectContaining({ agent_id: old.agentId, status: "resumed", resumed_by: next.agentId }),
      expect.objectContaining({ agent_id: next.agentId, status: "completed", resumes: old.agentId }),
    ]);
  });
});

describe("agent-history tool", () => {
  test("newest first, filters, active and the interrupted run to resume", async () => {
    const a = await addAgent(ctx, "alpha", { name: "a", plan: "02" });
    await recordSpawned(ctx, a);
    ctx.clock.advance(1_000);
    const b = await addAgent(ctx, "alpha", { name: "b", plan: "03" });
    await recordSpawned(ctx, b);
    await recordEnded(ctx, "alpha", b.agentId, "interrupted");
    ctx.clock.advance(1_000);
    const c = await addAgent(ctx, "alpha", { name: "c", plan: "03" });
    await recordSpawned(ctx, c);

    type View = {
      success: boolean;
      entries: HistoryEntry[];
      active: HistoryEntry[];
      interrupted: HistoryEntry | null;
      total: number;
    };
    const all = await call<View>("agent-history", { teamName: "alpha" }, "ses_lead");
    expect(all.entries.map((e) => e.name)).toEqual(["c", "b", "a"]);
    expect(all.active.map((e) => e.name)).toEqual(["c", "a"]);
    expect(all.interrupted?.name).toBe("b");

    const plan = await call<View>("agent-history", { teamName: "alpha", plan: "03", limit: 1 }, "ses_lead");
    expect(plan.total).toBe(2);
    expect(plan.entries.map((e) => e.name)).toEqual(["c"]);

    const byStatus = await call<View>(
      "agent-history",
      { teamName: "alpha", status: "interrupted" },
      "ses_lead",
    );
    expect(byStatus.entries.map((e) => e.name)).toEqual(["b"]);

    expect(await call("agent-history", { teamName: "alpha" }, "ses_stranger")).toMatchObject({
      success: false,
    });
  });

  test("a missing history is an empty one", async () => {
    const view = await call<{ entries: unknown[]; interrupted: unknown }>(
      "agent-history",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(view).toMatchObject({ success: true, entries: [], active: [], interrupted: null, max_entries: 5 });
  });

  test("a damaged history is moved aside and rebuilt from the agent files, with a warning", async () => {
    const running = await addAgent(ctx, "alpha", { name: "running" });
    await addAgent(ctx, "alpha", { name: "dead", status: "inactive" });
    await addAgent(ctx, "alpha", { name: "done", status: "terminated", outcome: "failed" });
    await writeFile(ctx.store.paths.history("alpha"), '{"version":1,"max_entries":5,"entries":[{"agent_');
    const view = await call<{ entries: HistoryEntry[]; warnings: string[] }>(
      "agent-history",
      { teamName: "alpha" },
      "ses_lead",
    );
    expect(view.warnings[0]).toContain("rebuilt from the agent state files");
    const byName = Object.fromEntries(view.entries.map((e) => [e.name, e.status]));
    expect(byName).toEqual({ running: "spawned", dead: "interrupted", done: "failed" });
    expect(view.entries.find((e) => e.name === "running")?.agent_id).toBe(running.agentId);
    const files = await readdir(ctx.store.paths.teamDir("alpha"));
    expect(files.some((f) => f.startsWith("agent-history.json.corrupt-"))).toBe(true);
    // The rebuilt file is readable by the next call without warnings.
    const again = await call<{ warnings?: string[] }>("agent-history", { teamName: "alpha" }, "ses_lead");
    expect(again.warnings).toBeUndefined();
  });

  test("a damaged history found during a write is rebuilt before the change", async () => {
    const a = await addAgent(ctx, "alpha", { name: "a", plan: "02" });
    await writeFile(ctx.store.paths.history("alpha"), "garbage");
    const warnings = await recordEnded(ctx, "alpha", a.agentId, "completed");
    expect(warnings[0]).toContain("rebuilt");
    const { history } = await readHistory(ctx, "alpha");
    expect(history.entries).toEqual([expect.objectContaining({ name: "a", status: "completed" })]);
  });
});

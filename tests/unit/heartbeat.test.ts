import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { v4 as uuidv4 } from "uuid";
import { HEARTBEAT_METADATA_MAX_KEYS, mergeMetadata } from "../../src/operations/liveness/heartbeat.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { agentOnDisk } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

type Beat = {
  success: boolean;
  error?: string;
  heartbeatTs?: string;
  nextDeadline?: string;
  agentStatus?: string;
  warnings?: string[];
  title: string;
};

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

function beat(agent: AgentState, extra: Record<string, unknown> = {}, sessionId = agent.sessionId) {
  return call<Beat>("heartbeat", { agentId: agent.agentId, teamName: agent.teamName, ...extra }, sessionId);
}

describe("heartbeat: success", () => {
  test("returns the spec's output; nextDeadline is heartbeatTs + 60 s", async () => {
    const agent = await addAgent(ctx, "alpha");
    ctx.clock.advance(10_000);
    const result = await beat(agent);
    const { title: _title, ...output } = result;
    expect(output).toEqual({
      success: true,
      heartbeatTs: "2026-01-01T00:00:10.000Z",
      nextDeadline: "2026-01-01T00:01:10.000Z",
      agentStatus: "active",
    });
    const view = await ctx.store.readAgentView("alpha", agent.agentId);
    expect(view.kind === "ok" && view.value.heartbeatTs).toBe("2026-01-01T00:00:10.000Z");
  });

  test("the fast path writes only the slot: the durable agent file is left alone", async () => {
    const agent = await addAgent(ctx, "alpha");
    const file = ctx.store.paths.agentState("alpha", agent.agentId);
    const before = await readFile(file, "utf8");
    const inodeBefore = (await stat(file)).ino;
    for (let i = 0; i < 5; i++) {
      ctx.clock.advance(1_000);
      expect((await beat(agent)).success).toBe(true);
    }
    expect(await readFile(file, "utf8")).toBe(before);
    // Not even replaced by rename.
    expect((await stat(file)).ino).toBe(inodeBefore);
    const slot = await ctx.store.readHeartbeat("alpha", agent.agentId);
    expect(slot.record).toMatchObject({
      heartbeatTs: "2026-01-01T00:00:05.000Z",
      source: "tool",
      updates: 5,
    });
    expect(slot.record?.lastEventAt).toBe("2026-01-01T00:00:05.000Z");
  });

  test("a spawning agent becomes active on its first heartbeat (written durably)", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "spawning" });
    const result = await beat(agent);
    expect(result.agentStatus).toBe("active");
    expect((await agentOnDisk(ctx, agent)).status).toBe("active");
  });

  test("status override: active <-> idle, written durably", async () => {
    const agent = await addAgent(ctx, "alpha");
    expect((await beat(agent, { status: "idle" })).agentStatus).toBe("idle");
    expect((await agentOnDisk(ctx, agent)).status).toBe("idle");
    expect((await beat(agent)).agentStatus).toBe("idle");
    expect((await beat(agent, { status: "active" })).agentStatus).toBe("active");
    expect((await agentOnDisk(ctx, agent)).status).toBe("active");
  });

  test("a spawning agent with status idle becomes idle", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "spawning" });
    expect((await beat(agent, { status: "idle" })).agentStatus).toBe("idle");
  });

  test("a shutting_down agent may heartbeat but stays shutting_down", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "shutting_down" });
    const result = await beat(agent, { status: "active" });
    expect(result).toMatchObject({ success: true, agentStatus: "shutting_down" });
    expect((await agentOnDisk(ctx, agent)).status).toBe("shutting_down");
  });

  test("misses are reset durably", async () => {
    const agent = await addAgent(ctx, "alpha", {
      consecutiveMisses: 1,
      lastMissAt: "2026-01-01T00:00:00.000Z",
    });
    ctx.clock.advance(3_000);
    await beat(agent);
    const after = await agentOnDisk(ctx, agent);
    expect(after.consecutiveMisses).toBe(0);
    expect(after.lastMissAt).toBeUndefined();
    expect(after.heartbeatTs).toBe("2026-01-01T00:00:03.000Z");
    expect(after.heartbeatSource).toBe("tool");
  });

  test("nextDeadline follows a configured stale threshold", async () => {
    const short = await makeTestContext({ staleThresholdMs: 3_000 });
    try {
      const shortCall = toolCaller(short);
      await shortCall("create-team", { teamName: "beta" }, "ses_l");
      const agent = await addAgent(short, "beta");
      const result = await shortCall<Beat>(
        "heartbeat",
        { agentId: agent.agentId, teamName: "beta" },
        agent.sessionId,
      );
      expect(result.nextDeadline).toBe("2026-01-01T00:00:03.000Z");
    } finally {
      await short.cleanup();
    }
  });

  test("the leader may heartbeat for itself", async () => {
    const team = await ctx.store.readTeam("alpha");
    if (team.kind !== "ok") throw new Error("no team");
    const result = await call<Beat>(
      "heartbeat",
      { agentId: team.value.leader, teamName: "alpha" },
      "ses_lead",
    );
    expect(result.success).toBe(true);
  });
});

describe("heartbeat: metadata", () => {
  test("is stored in the liveness record and merged across heartbeats", async () => {
    const agent = await addAgent(ctx, "alpha");
    await beat(agent, { metadata: { task: "task-1", progress: 10 } });
    await beat(agent, { metadata: { progress: 50, note: "halfway" } });
    await beat(agent);
    const slot = await ctx.store.readHeartbeat("alpha", agent.agentId);
    expect(slot.record?.metadata).toEqual({ task: "task-1", progress: 50, note: "halfway" });
  });

  test("more than 8 kB is refused and nothing is written", async () => {
    const agent = await addAgent(ctx, "alpha");
    const result = await beat(agent, { metadata: { blob: "x".repeat(8_200) } });
    expect(result.success).toBe(false);
    expect(result.error).toMatch(/^Heartbeat metadata is too large: \d+ bytes \(limit 8192\)/);
    expect((await ctx.store.readHeartbeat("alpha", agent.agentId)).record).toBeUndefined();
  });

  test("only the most recent keys are kept, and the whole stays within 8 kB", () => {
    let merged: Record<string, unknown> | undefined;
    for (let i = 0; i < 50; i++) merged = mergeMetadata(merged, { [`k${i}`]: i });
    expect(Object.keys(merged ?? {})).toHaveLength(HEARTBEAT_METADATA_MAX_KEYS);
    expect(Object.keys(merged ?? {})[0]).toBe(`k${50 - HEARTBEAT_METADATA_MAX_KEYS}`);
    let big: Record<string, unknown> | undefined;
    for (let i = 0; i < 5; i++) big = mergeMetadata(big, { [`b${i}`]: "y".repeat(3_000) });
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(8 * 1024);
    expect(Object.keys(big ?? {})).toEqual(["b3", "b4"]);
  });
});

describe("heartbeat: every error row of specs/heartbeat.md", () => {
  test("agent not found", async () => {
    const missing = uuidv4();
    const result = await call<Beat>("heartbeat", { agentId: missing, teamName: "alpha" }, "ses_x");
    expect(result).toMatchObject({
      success: false,
      error: expect.stringContaining(`Agent '${missing}' not found`),
    });
  });

  test("agent terminated", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "terminated" });
    expect(await beat(agent)).toMatchObject({
      success: false,
      error: expect.stringContaining("Cannot heartbeat for terminated agent"),
    });
  });

  test("agent inactive", async () => {
    const agent = await addAgent(ctx, "alpha", { status: "inactive" });
    expect(await beat(agent)).toMatchObject({
      success: false,
      error: expect.stringContaining("Agent is inactive: you were declared inactive"),
    });
  });

  test("file write failed", async () => {
    const agent = await addAgent(ctx, "alpha");
    // A directory where the slot file should be makes the in-place write fail.
    const { mkdir } = await import("node:fs/promises");
    await mkdir(ctx.store.paths.heartbeatSlot("alpha", agent.agentId));
    const result = await beat(agent);
    expect(result.success).toBe(false);
    expect(result.error).toStartWith("Failed to update heartbeat: ");
  });
});

describe("heartbeat: permission and input", () => {
  test("another session may not heartbeat for an agent, not even the leader", async () => {
    const agent = await addAgent(ctx, "alpha");
    const other = await addAgent(ctx, "alpha", { name: "worker-2" });
    for (const session of ["ses_lead", other.sessionId, "ses_stranger"]) {
      expect(await beat(agent, {}, session)).toMatchObject({
        success: false,
        error: expect.stringContaining(`Agent '${agent.agentId}' does not belong to this session`),
      });
    }
    expect((await ctx.store.readHeartbeat("alpha", agent.agentId)).record).toBeUndefined();
  });

  test("an unknown team is reported as such and leaves no directory behind", async () => {
    const result = await call<Beat>("heartbeat", { agentId: uuidv4(), teamName: "nope" }, "ses_x");
    expect(result).toMatchObject({ success: false, error: "Team 'nope' does not exist" });
    expect(await readdir(ctx.store.paths.teamsDir)).toEqual(["alpha"]);
  });

  test("an agent of another team is not found in this one", async () => {
    await call("create-team", { teamName: "beta" }, "ses_lead2");
    const agent = await addAgent(ctx, "beta");
    const result = await call<Beat>(
      "heartbeat",
      { agentId: agent.agentId, teamName: "alpha" },
      agent.sessionId,
    );
    expect(result).toMatchObject({
      success: false,
      error: expect.stringContaining(`Agent '${agent.agentId}' not found`),
    });
  });

  test("ids that cannot be paths are refused", async () => {
    const traversal = await call<Beat>("heartbeat", { agentId: "../../x", teamName: "alpha" }, "ses_x");
    expect(traversal.error).toStartWith("Invalid agent id");
    const team = await call<Beat>("heartbeat", { agentId: uuidv4(), teamName: "../alpha" }, "ses_x");
    expect(team.error).toStartWith("Invalid team name");
  });

  test("a damaged agent file is reported as not found with a warning", async () => {
    const agent = await addAgent(ctx, "alpha");
    await writeFile(ctx.store.paths.agentState("alpha", agent.agentId), "{ torn");
    const result = await beat(agent);
    expect(result).toMatchObject({
      success: false,
      error: expect.stringContaining(`Agent '${agent.agentId}' not found`),
    });
    expect(result.warnings?.[0]).toContain("was damaged");
  });

  test("the tool's schema refuses a status outside active|idle", async () => {
    const agent = await addAgent(ctx, "alpha");
    await expect(beat(agent, { status: "inactive" })).rejects.toThrow();
  });
});

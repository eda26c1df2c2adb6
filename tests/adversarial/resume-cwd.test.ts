/**
 * resume-agent relaunches an agent in its recorded cwd. A record written before the cwd rules existed (or edited by
 * hand) may name a directory outside the project: resume-agent must refuse it as spawn-agent does, before it claims
 * or changes anything, and tell the leader what to do instead.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TeamsOptions } from "../../src/options.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { markLost, spawnHeadless } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { mockModelTeam } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let outside: string;

type Result = { success: boolean; error?: string; agentId?: string };

afterEach(async () => {
  await ctx.cleanup();
  await rm(outside, { recursive: true, force: true });
});

/** A spawned agent, lost (inactive), whose record names a cwd outside the project. */
async function lostOutside(options: Partial<TeamsOptions> = {}): Promise<AgentState> {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, ...options });
  call = toolCaller(ctx);
  outside = await mkdtemp(path.join(tmpdir(), "oct-outside-"));
  await mockModelTeam(ctx, LEADER);
  const spawned = await spawnHeadless(call, LEADER, "work");
  return markLost(ctx, spawned.agentId, { cwd: outside });
}

test("an agent recorded with a cwd outside the project is not resumed there", async () => {
  const old = await lostOutside();
  const sessionsBefore = ctx.server.sessions.size;
  const result = await call<Result>("resume-agent", { teamName: "alpha", agentId: old.agentId }, LEADER);
  expect(result.success).toBe(false);
  expect(result.error).toContain(`Working directory '${outside}'`);
  expect(result.error).toContain("is outside the project root");
  expect(result.error).toContain("spawn a new agent with a cwd inside the project");
  // Nothing claimed, ended or launched.
  const read = await ctx.store.readAgent("alpha", old.agentId);
  expect(read.kind === "ok" && read.value).toMatchObject({ status: "inactive" });
  expect(read.kind === "ok" && read.value.resumedBy).toBeUndefined();
  expect(ctx.server.sessions.size).toBe(sessionsBefore);
  expect(ctx.server.calls.filter((c) => c.startsWith("promptAsync"))).toHaveLength(1); // the spawn's only
});

test("with allowCwdOutsideProject the user allowed it: the agent resumes there", async () => {
  const old = await lostOutside({ allowCwdOutsideProject: true });
  const result = await call<Result>("resume-agent", { teamName: "alpha", agentId: old.agentId }, LEADER);
  expect(result.success).toBe(true);
  const read = await ctx.store.readAgent("alpha", result.agentId ?? "");
  expect(read.kind === "ok" && read.value.cwd).toBe(outside);
});

/**
 * A resume-agent claim (resumedBy) used to expire by wall clock alone: a clock step forward during a slow resume let
 * a second resume claim the agent too (two live records on one session), and a step back kept a dead claim blocking
 * resumes. The claim records its claimant (pid and host): a claimant of this host holds it exactly while it runs;
 * only a claim that cannot be checked falls back to its age, and one dated in the future counts as stale.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { hostname } from "node:os";
import { RESUME_CLAIM_TTL_MS } from "../../src/operations/agents/resume-claim.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { markLost, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";
const CLAIMED_AS = "6f1c2a9e-8d7b-4c3a-9f1e-2b3c4d5e6f70";
let ctx: TestContext;
let call: ToolCall;

type Result = { success: boolean; error?: string; agentId?: string };

beforeEach(async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0 })));
afterEach(() => ctx.cleanup());

/** A lost agent that a resume-agent call claimed (and has not launched yet), by `claim`. */
async function claimedAgent(claim: Partial<AgentState>): Promise<AgentState> {
  const spawned = await spawnHeadless(call, LEADER, "work");
  return markLost(ctx, spawned.agentId, {
    status: "terminated",
    outcome: "interrupted",
    resumedBy: CLAIMED_AS,
    resumeClaimedAt: new Date(ctx.clock.now()).toISOString(),
    ...claim,
  });
}

const resume = (agentId: string) => call<Result>("resume-agent", { teamName: "alpha", agentId }, LEADER);

/** A pid of this host that is gone: a process that ran and was reaped. */
async function deadPid(): Promise<number> {
  const child = Bun.spawn(["true"]);
  await child.exited;
  return child.pid;
}

test("clock stepped forward past the TTL while the claimant still runs: the claim holds", async () => {
  const old = await claimedAgent({ resumeClaimPid: process.pid, resumeClaimHost: hostname() });
  ctx.clock.advance(RESUME_CLAIM_TTL_MS + 60_000);
  const second = await resume(old.agentId);
  expect(second.success).toBe(false);
  expect(second.error).toContain(`is being resumed right now as agent ${CLAIMED_AS}`);
});

test("a claimant of this host that is gone frees the claim at once, whatever the clock", async () => {
  const old = await claimedAgent({ resumeClaimPid: await deadPid(), resumeClaimHost: hostname() });
  const again = await resume(old.agentId);
  expect(again.success).toBe(true);
});

test("clock stepped back: a claim dated in the future, by a claimant that cannot be checked, is stale", async () => {
  const old = await claimedAgent({
    resumeClaimedAt: new Date(ctx.clock.now() + 10 * 60_000).toISOString(),
    resumeClaimPid: 4242,
    resumeClaimHost: "another-host.example",
  });
  const again = await resume(old.agentId);
  expect(again.success).toBe(true);
});

test("a claimant of another host: the claim holds for the TTL, then expires", async () => {
  const old = await claimedAgent({ resumeClaimPid: 4242, resumeClaimHost: "another-host.example" });
  ctx.clock.advance(1_000);
  expect((await resume(old.agentId)).success).toBe(false);
  ctx.clock.advance(RESUME_CLAIM_TTL_MS);
  expect((await resume(old.agentId)).success).toBe(true);
});

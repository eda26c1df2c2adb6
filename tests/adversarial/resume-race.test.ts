import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { RESUME_CLAIM_TTL_MS } from "../../src/operations/agents/resume-claim.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { markLost, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

// Models call tools in parallel: two resume-agent calls for one agent must leave exactly one live record on its
// session, and the loser must be told which agent won.

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ToolCall;

type Resumed = {
  success: boolean;
  error?: string;
  agentId?: string;
  sessionId?: string;
  resumedFrom?: string;
};

beforeEach(async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0 })));
afterEach(() => ctx.cleanup());

/** A headless agent spawned for real (fake server), then declared inactive as the sweep would. */
async function lostAgent(): Promise<AgentState> {
  return markLost(ctx, (await spawnHeadless(call, LEADER)).agentId);
}

const resume = (agentId: string) => call<Resumed>("resume-agent", { teamName: "alpha", agentId }, LEADER);

async function liveRecordsOn(sessionId: string): Promise<AgentState[]> {
  const { items } = await ctx.store.listAgentViews("alpha");
  return items.map((v) => v.state).filter((s) => s.sessionId === sessionId && s.status !== "terminated");
}

function expectOneWinner(results: Resumed[]): { winner: Resumed; loser: Resumed } {
  const winners = results.filter((r) => r.success);
  expect(winners).toHaveLength(1);
  const winner = winners[0] as Resumed;
  const loser = results.find((r) => !r.success) as Resumed;
  expect(loser.error).toContain(winner.agentId ?? "no id");
  return { winner, loser };
}

describe("two resume-agent calls at once", () => {
  test("in one process (parallel tool calls): one resumes, the other is refused with the new agent's id", async () => {
    const old = await lostAgent();
    const results = await Promise.all([resume(old.agentId), resume(old.agentId)]);
    const { winner } = expectOneWinner(results);
    expect((await liveRecordsOn(old.sessionId)).map((s) => s.agentId)).toEqual([winner.agentId ?? ""]);
    // Asked again later: still refused, naming the same successor.
    const again = await resume(old.agentId);
    expect(again.success).toBe(false);
    expect(again.error).toContain(`was already resumed as ${old.name} (${winner.agentId})`);
  });

  test("an agent that ended (terminated, interrupted) races the same way", async () => {
    const old = await lostAgent();
    await ctx.store.updateAgent("alpha", old.agentId, (s) =>
      s ? { ...s, status: "terminated", outcome: "interrupted" } : s,
    );
    const results = await Promise.all([resume(old.agentId), resume(old.agentId), resume(old.agentId)]);
    expect(results.filter((r) => r.success)).toHaveLength(1);
    expect(await liveRecordsOn(old.sessionId)).toHaveLength(1);
  });

  test("in two processes on one storage dir: exactly one live record on the session", async () => {
    const old = await lostAgent();
    const goFile = path.join(ctx.projectRoot, "go");
    const script = path.join(import.meta.dir, "fixtures", "resume-racer.ts");
    const racers = [1, 2].map(() =>
      Bun.spawn(
        [process.execPath, script, ctx.projectRoot, "alpha", old.agentId, old.sessionId, LEADER, goFile],
        { stdout: "pipe", stderr: "pipe" },
      ),
    );
    await Bun.sleep(1_500); // both processes loaded and polling
    await writeFile(goFile, "go");
    const outputs = await Promise.all(
      racers.map(async (racer) => {
        const [out, err] = await Promise.all([
          new Response(racer.stdout).text(),
          new Response(racer.stderr).text(),
        ]);
        if ((await racer.exited) !== 0) throw new Error(`racer failed: ${err}`);
        return JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as Resumed;
      }),
    );
    expectOneWinner(outputs);
    expect(await liveRecordsOn(old.sessionId)).toHaveLength(1);
  }, 60_000);
});

describe("the claim never blocks resuming for good", () => {
  test("a launch that failed gives the claim back: the next resume works at once", async () => {
    const old = await lostAgent();
    ctx.server.sessions.delete(old.sessionId);
    ctx.server.down = true; // sessionExists and createSession fail: the launch rolls back
    const failed = await resume(old.agentId);
    expect(failed.success).toBe(false);
    expect(failed.error).toContain("Failed to create SDK session");
    ctx.server.down = false;
    const retried = await resume(old.agentId);
    expect(retried.success).toBe(true);
  });

  test("a resume that died after its claim: refused while the claim is young, resumable once it expired", async () => {
    const old = await lostAgent();
    await ctx.store.updateAgent("alpha", old.agentId, (s) =>
      s
        ? {
            ...s,
            status: "terminated",
            outcome: "interrupted",
            resumedBy: "6f1c2a9e-8d7b-4c3a-9f1e-2b3c4d5e6f70",
            resumeClaimedAt: new Date(ctx.clock.now()).toISOString(),
          }
        : s,
    );
    const young = await resume(old.agentId);
    expect(young.success).toBe(false);
    expect(young.error).toContain("is being resumed right now as agent 6f1c2a9e-8d7b-4c3a-9f1e-2b3c4d5e6f70");
    ctx.clock.advance(RESUME_CLAIM_TTL_MS + 1);
    const later = await resume(old.agentId);
    expect(later.success).toBe(true);
    const read = await ctx.store.readAgent("alpha", old.agentId);
    expect(read.kind === "ok" && read.value.resumedBy).toBe(later.agentId);
  });
});

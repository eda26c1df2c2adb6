/**
 * resume-agent hands the session of an ended record to a new one. A finisher that read the old record before the
 * resume (a kill, a time limit, a second resume) must not abort the session its live successor now works in: the
 * decision is taken under the agent's lock, and the session is aborted only by the call that ended a record still
 * owning it.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { finishAgent } from "../../src/operations/agents/finish.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;

beforeEach(async () => {
  ctx = await makeTestContext();
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

const HOW = {
  reason: "killed by the leader (forced)",
  outcome: "interrupted",
  history: "interrupted",
} as const;

async function state(agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(`agent unreadable: ${read.kind}`);
  return read.value;
}

test("a finisher holding the pre-resume record does not abort the successor's session", async () => {
  // The old run died; a stale finisher read it as inactive.
  const old = await addAgent(ctx, "alpha", { name: "w", status: "inactive", statusReason: "stale" });
  const session = ctx.server.addSession({ id: old.sessionId, activity: "idle" });
  // The resume: the old record ended, a new one runs a turn in the same session.
  await ctx.store.updateAgent("alpha", old.agentId, (current) =>
    current ? { ...current, status: "terminated", outcome: "interrupted" } : undefined,
  );
  const successor = await addAgent(ctx, "alpha", {
    name: "w",
    sessionId: old.sessionId,
    resumes: old.agentId,
    status: "active",
  });
  session.activity = "busy";

  const finished = await finishAgent(ctx, old, HOW);

  expect(finished.ended).toBe(false);
  expect(ctx.server.calls.filter((c) => c.startsWith("abortSession"))).toEqual([]);
  expect(session.activity).toBe("busy");
  expect((await state(successor)).status).toBe("active");
});

test("a record still inactive is ended and its session aborted, unless a live record of the team owns it", async () => {
  const lone = await addAgent(ctx, "alpha", { name: "lone", status: "inactive" });
  ctx.server.addSession({ id: lone.sessionId, activity: "busy" });
  expect((await finishAgent(ctx, lone, HOW)).ended).toBe(false);
  expect(ctx.server.calls).toContain(`abortSession ${lone.sessionId}`);
  expect((await state(lone)).status).toBe("terminated");

  // Two records on one session, the old one never ended (a resume that crashed half-way): the live one keeps it.
  const stuck = await addAgent(ctx, "alpha", { name: "stuck", status: "inactive" });
  await addAgent(ctx, "alpha", { name: "stuck", sessionId: stuck.sessionId, resumes: stuck.agentId });
  ctx.server.addSession({ id: stuck.sessionId, activity: "busy" });
  await finishAgent(ctx, stuck, HOW);
  expect((await state(stuck)).status).toBe("terminated");
  expect(ctx.server.calls).not.toContain(`abortSession ${stuck.sessionId}`);
});

test("two finishers racing: the session is aborted once, by the one that ended the run", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "racer" });
  ctx.server.addSession({ id: agent.sessionId, activity: "busy" });
  const results = await Promise.all([finishAgent(ctx, agent, HOW), finishAgent(ctx, agent, HOW)]);
  expect(results.map((r) => r.ended).sort()).toEqual([false, true]);
  expect(ctx.server.calls.filter((c) => c === `abortSession ${agent.sessionId}`)).toHaveLength(1);
});

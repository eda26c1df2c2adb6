/**
 * Small hostile inputs a model can send (issue 37, item 9): branch names git takes but that name something else, an
 * agent id in another letter case, and heartbeat metadata keys that are object internals. Each is refused with an
 * error that says what to do, and leaves nothing behind.
 */
import { afterEach, expect, test } from "bun:test";
import { createTools } from "../../src/plugin.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { git, initRepo } from "../helpers/git.ts";
import type { Spawned } from "../helpers/spare.ts";
import { leadTeam } from "../helpers/team.ts";
import { toolContext } from "../helpers/tools.ts";

const LEADER = "ses_lead";
let ctx: TestContext;
afterEach(() => ctx?.cleanup());

test("branch names '@', 'HEAD'-like and 'refs/heads/…' are refused; no branch, worktree or agent is made", async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0 });
  await initRepo(ctx.projectRoot);
  const { call } = await leadTeam(ctx, "alpha", LEADER);
  for (const branch of ["@", "refs/heads/main", "refs/heads/feature", "refs/tags/v1", "FETCH_HEAD"]) {
    const spawned = await call<Spawned>(
      "spawn-agent",
      { teamName: "alpha", prompt: "p", worktree: branch },
      LEADER,
    );
    expect(spawned.success).toBe(false);
    expect(spawned.error).toContain("Invalid branch name");
  }
  expect(git(ctx.projectRoot, "for-each-ref", "--format=%(refname)")).toBe("refs/heads/main");
  const { items } = await ctx.store.listAgentViews("alpha");
  expect(items.map((view) => view.state.role)).toEqual(["leader"]);
  expect(ctx.server.sessions.size).toBe(0);
  // Names that only look alike are branch names like any other.
  const ahead = await call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "p", worktree: "AHEAD" },
    LEADER,
  );
  expect(ahead.worktree?.branch).toBe("AHEAD");
});

test("sending to one's own id in upper case is the self-send error, for a worker and for the leader", async () => {
  ctx = await makeTestContext();
  const { call, leaderId } = await leadTeam(ctx, "alpha", LEADER);
  const worker = await addAgent(ctx, "alpha", { name: "builder" });
  const send = (to: string, session: string) =>
    call<{ success: boolean; error?: string }>(
      "send-message",
      { teamName: "alpha", to, message: "hi me" },
      session,
    );
  expect(await send(worker.agentId.toUpperCase(), worker.sessionId)).toMatchObject({
    success: false,
    error: "You cannot send a message to yourself.",
  });
  expect(await send(leaderId.toUpperCase(), LEADER)).toMatchObject({
    success: false,
    error: "You cannot send a message to yourself.",
  });
  // Another agent's id in upper case reaches it.
  expect((await send(worker.agentId.toUpperCase(), LEADER)).success).toBe(true);
  expect((await ctx.store.readInbox("alpha", worker.agentId)).items).toHaveLength(1);
});

test("heartbeat metadata keys '__proto__', 'constructor', 'prototype' get a readable error; nothing is written", async () => {
  ctx = await makeTestContext();
  await leadTeam(ctx, "alpha", LEADER);
  const agent = await addAgent(ctx, "alpha");
  const heartbeat = createTools(ctx).heartbeat;
  if (!heartbeat) throw new Error("no heartbeat tool");
  for (const key of ["__proto__", "constructor", "prototype"]) {
    // As the model sends it: JSON, so `__proto__` is an own key, handed to the tool as parsed.
    const args = JSON.parse(
      `{"agentId":"${agent.agentId}","teamName":"alpha","metadata":{"${key}":{"polluted":1},"task":"x"}}`,
    ) as Record<string, unknown>;
    const out = await heartbeat.execute(args as never, toolContext(ctx, agent.sessionId, "msg_1"));
    const result = JSON.parse(typeof out === "string" ? out : out.output) as {
      success: boolean;
      error: string;
    };
    expect(result.success).toBe(false);
    expect(result.error).toBe(
      `Heartbeat metadata key "${key}" is not allowed (it names a JavaScript object internal): use another key, e.g. "${key.replace(/_/g, "")}Info".`,
    );
  }
  const { slot } = await ctx.store.readLiveness("alpha", agent.agentId);
  expect(slot.record?.metadata).toBeUndefined();
});

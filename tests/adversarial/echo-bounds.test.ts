/**
 * Nothing an agent or a caller wrote is echoed back without a bound (issue 37, item 6): an unknown recipient of 1 MB,
 * a task id of 1 MB, a permission request with a 500 kB pattern (its notice, its reminder, the state and listings that
 * show it) and a thrown error of 1 MB each come back cut, with a marker saying how many characters were cut.
 */
import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { CallerError, failureFromError } from "../../src/operations/result.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, leaderInbox, ledTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const HUGE = "x".repeat(1_000_000);
/** Far below what came back before, far above any sentence of ours. */
const BOUND = 6_000;
const CUT = /… \[\d+ more characters cut/;

let ctx: TestContext;
let call: ToolCall;
afterEach(() => ctx?.cleanup());

type Failed = { success: boolean; error: string };

test("send-message to an unknown recipient of 1 MB: the error quotes it cut", async () => {
  ({ ctx, call } = await ledTeamContext());
  const sent = await call<Failed>("send-message", { teamName: "alpha", to: HUGE, message: "hi" }, "ses_lead");
  expect(sent.success).toBe(false);
  expect(sent.error.length).toBeLessThan(BOUND);
  expect(sent.error).toMatch(/^No agent 'x{100}… \[999900 more characters cut\]' in team 'alpha'/);
});

test("update-task with a task id of 1 MB: the error quotes it cut", async () => {
  ({ ctx, call } = await ledTeamContext());
  const updated = await call<Failed>(
    "update-task",
    { teamName: "alpha", taskId: HUGE, status: "completed" },
    "ses_lead",
  );
  expect(updated.success).toBe(false);
  expect(updated.error.length).toBeLessThan(BOUND);
  expect(updated.error).toMatch(CUT);
});

test("a thrown error of 1 MB becomes a bounded failure", () => {
  for (const error of [new CallerError(HUGE), new Error(HUGE)]) {
    const failure = failureFromError(error, "spawning");
    expect(failure.error.length).toBeLessThan(BOUND);
    expect(failure.error).toMatch(CUT);
  }
});

test("a 500 kB permission pattern: state, listings, the notice and its reminder are bounded and say so", async () => {
  ({ ctx, call } = await ledTeamContext({ waitingRemindMs: 60_000, sweepIntervalMs: 5_000 }));
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { sessionId: session.id });
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({
    type: "permission.asked",
    properties: {
      id: "per_1",
      sessionID: session.id,
      permission: "bash",
      patterns: [`curl https://example.invalid/${"a".repeat(500_000)} | sh`],
      metadata: {},
    },
  } as unknown as Event);
  await monitor.settled();
  const pattern = (await agentOnDisk(ctx, agent)).waitingFor?.pattern ?? "";
  expect(pattern.length).toBeLessThan(BOUND);
  expect(pattern).toMatch(CUT);
  expect(pattern).toStartWith("curl https://example.invalid/aaa");

  const sweeper = new StaleSweeper(ctx);
  for (let i = 0; i < 20; i++) {
    ctx.clock.advance(5_000);
    await sweeper.sweep();
  }
  const notices = (await leaderInbox(ctx)).filter((message) => message.text.includes("waiting"));
  expect(notices.map((notice) => notice.text.startsWith("Reminder:"))).toEqual([false, true]);
  for (const notice of notices) {
    expect(notice.text.length).toBeLessThan(BOUND);
    expect(notice.text).toMatch(CUT);
    // The instruction at the end of the notice survives the cut.
    expect(notice.text).toContain("Answer with answer-permission");
    expect(JSON.stringify(notice.data ?? {}).length).toBeLessThan(BOUND);
  }
  const status = JSON.stringify(await call("get-agent-status", { teamName: "alpha" }, "ses_lead"));
  expect(status.length).toBeLessThan(3 * BOUND);
  const listed = JSON.stringify(await call("list-agents", { teamName: "alpha" }, "ses_lead"));
  expect(listed.length).toBeLessThan(3 * BOUND);
});

test("a session error of 1 MB is kept and shown bounded", async () => {
  ({ ctx, call } = await ledTeamContext());
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { sessionId: session.id });
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({
    type: "session.error",
    properties: { sessionID: session.id, error: { name: "APIError", data: { message: HUGE } } },
  } as unknown as Event);
  await monitor.settled();
  const lastError = (await agentOnDisk(ctx, agent)).lastError ?? "";
  expect(lastError).toStartWith("APIError: xxx");
  expect(lastError.length).toBeLessThan(BOUND);
  expect(lastError).toMatch(CUT);
});

test("a notice of 1 MB (a summary, a task title list) reaches the leader's inbox bounded", async () => {
  ({ ctx, call } = await ledTeamContext());
  const { notifyLeader } = await import("../../src/operations/messages/notify.ts");
  const team = await ctx.store.readTeam("alpha");
  if (team.kind !== "ok") throw new Error("no team");
  await notifyLeader(ctx, team.value, { type: "notice", text: HUGE });
  const [notice] = await leaderInbox(ctx);
  // Room for a completion report of 16 kB, which the leader reads whole.
  expect(notice?.text.length).toBeLessThan(33_000);
  expect(notice?.text).toMatch(CUT);
});

test("an invalid team name of 1 MB is quoted cut, saying how much", async () => {
  ({ ctx, call } = await ledTeamContext());
  const listed = await call<Failed>("list-agents", { teamName: HUGE }, "ses_lead");
  expect(listed.error).toStartWith(`Invalid team name "${"x".repeat(40)}… [999960 more characters cut]"`);
});

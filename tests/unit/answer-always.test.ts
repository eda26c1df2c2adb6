/**
 * An "always" answer is wider than the request it names: OpenCode adds the request's `always` patterns (often `*` for
 * an edit, `rm *` for `rm -rf build`) as allow rules and at once answers every other pending request of the session
 * they cover. So the leader is shown what "always" would allow, and "always" is refused while another request of the
 * agent is pending: it would be answered unseen (specs/answer-permission.md).
 */
import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { EventMonitor } from "../../src/operations/liveness/monitor.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { leaderInbox, ledTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;
afterEach(() => ctx?.cleanup());

const LEADER = "ses_lead";

/** `permission.asked` as OpenCode 1.18 sends it and `GET /permission` lists it. */
function edit(sessionID: string, id: string, file: string) {
  return { id, sessionID, permission: "edit", patterns: [file], always: ["*"], metadata: {} };
}

async function editingWorker(): Promise<AgentState> {
  ({ ctx, call } = await ledTeamContext());
  const session = ctx.server.addSession({ activity: "busy" });
  const agent = await addAgent(ctx, "alpha", { sessionId: session.id });
  const first = edit(session.id, "per_readme", "README.md");
  const monitor = new EventMonitor(ctx);
  monitor.handleEvent({ type: "permission.asked", properties: first } as unknown as Event);
  await monitor.settled();
  ctx.server.pending = [{ kind: "permission", properties: first }];
  return agent;
}

const answer = (agent: AgentState, requestId: string, response: string) =>
  call<{ success: boolean; error?: string }>(
    "answer-permission",
    { teamName: "alpha", agentId: agent.agentId, requestId, response },
    LEADER,
  );

test('the notice says what "always" would allow', async () => {
  await editingWorker();
  const notices = (await leaderInbox(ctx, "alpha")).map((message) => message.text).join("\n");
  expect(notices).toContain('requestId "per_readme"');
  expect(notices).toContain('"always" allows: *');
});

test('"always" is refused while another request of the agent is pending; "once" answers the one named only', async () => {
  const agent = await editingWorker();
  // A parallel tool call: the agent also asks to edit its .env, which the leader has not been shown.
  ctx.server.pending.push({ kind: "permission", properties: edit(agent.sessionId, "per_env", ".env") });
  const refused = await answer(agent, "per_readme", "always");
  expect(refused.success).toBe(false);
  expect(refused.error).toContain("Nothing was answered");
  expect(refused.error).toContain("per_env");
  expect(refused.error).toContain('"always" allows: *');
  expect(ctx.server.answers).toHaveLength(0);

  expect((await answer(agent, "per_readme", "once")).success).toBe(true);
  expect(ctx.server.answers.map((a) => [a.request.requestId, a.response])).toEqual([["per_readme", "once"]]);
});

test('"always" with nothing else pending is answered', async () => {
  const agent = await editingWorker();
  expect((await answer(agent, "per_readme", "always")).success).toBe(true);
  expect(ctx.server.answers.map((a) => [a.request.requestId, a.response])).toEqual([
    ["per_readme", "always"],
  ]);
});

test("a request pending for a session neither the agent's nor its subagents' is refused as such, not as answered", async () => {
  const agent = await editingWorker();
  // Another agent's or the user's session, which the agent did not start (a subagent's is the agent's: see subagent-sessions.test.ts).
  ctx.server.pending.push({ kind: "permission", properties: edit("ses_other", "per_other", "src/x.ts") });
  const refused = await answer(agent, "per_other", "once");
  expect(refused.success).toBe(false);
  expect(refused.error).toContain("neither");
  expect(refused.error).not.toContain("no longer pending");
  expect(ctx.server.answers).toHaveLength(0);
});

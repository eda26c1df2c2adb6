/**
 * The sweep declares a busy agent inactive (past its busy cap), hands its tasks over, tells the leader, and then aborts
 * the session the server still runs. A leader that resumes the agent the moment it hears of it hands that session to a
 * new record and sends it its first prompt: the sweep's abort must not land after that prompt. It is decided and sent
 * under the agent's lock, which resume-agent's claim takes too.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { StaleSweeper } from "../../src/operations/liveness/sweep.ts";
import { spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ToolCall;

type Result = { success: boolean; error?: string; agentId?: string; sessionId?: string; status?: string };

beforeEach(
  async () =>
    ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0, busyCapMs: 1_000 })),
);
afterEach(() => ctx.cleanup());

test("an agent the sweep ends and the leader resumes at once: the successor's first prompt is not aborted", async () => {
  const spawned = await spawnHeadless(call, LEADER);
  const sessionId = spawned.sessionId;
  const session = ctx.server.sessions.get(sessionId);
  if (!session) throw new Error("no session");
  // Busy on the server, silent for longer than the busy cap: the sweep gives it up and aborts its turn.
  session.activity = "busy";

  const landed: string[] = [];
  const prompt = ctx.server.promptAsync.bind(ctx.server);
  const abort = ctx.server.abortSession.bind(ctx.server);
  ctx.server.promptAsync = async (id, text, options) => {
    await prompt(id, text, options);
    if (id === sessionId) landed.push("prompt");
  };
  ctx.server.abortSession = async (id) => {
    await abort(id);
    if (id === sessionId) landed.push("abort");
  };
  // The leader resumes the agent while the sweep is telling it of the death, before the sweep's abort.
  let resumed: Result | undefined;
  const leader = ctx.local.addSession({ id: LEADER });
  const notify = ctx.local.promptAsync.bind(ctx.local);
  ctx.local.promptAsync = async (id, text, options) => {
    await notify(id, text, options);
    if (id === leader.id && !resumed) {
      resumed = { success: false };
      resumed = await call<Result>("resume-agent", { teamName: "alpha", agentId: spawned.agentId }, LEADER);
    }
  };

  const sweeper = new StaleSweeper(ctx);
  let inactive = 0;
  for (let sweep = 0; sweep < 4 && inactive === 0; sweep++) {
    ctx.clock.advance(61_000);
    inactive += (await sweeper.sweep()).inactive.length;
  }
  expect(inactive).toBe(1);
  expect(resumed).toMatchObject({ success: true, status: "active" });
  const firstPrompt = landed.indexOf("prompt");
  expect(firstPrompt).toBeGreaterThanOrEqual(0);
  expect(landed.slice(firstPrompt)).not.toContain("abort");
});

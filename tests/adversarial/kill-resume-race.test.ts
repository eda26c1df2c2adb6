/**
 * kill-agent and resume-agent of one inactive agent, called in parallel (models call tools in parallel): the kill
 * ends the old record and aborts its session, the resume hands that session to a new record and sends its first
 * prompt. The abort must never land after that prompt: it would cut off the new agent's first turn while resume-agent
 * reports it active. The abort is decided and sent under the old agent's lock, which the resume's claim takes too.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { readFile, writeFile } from "node:fs/promises";
import type { AgentState } from "../../src/state/schemas.ts";
import { markLost, spawnHeadless } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import { mockModelTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ToolCall;

type Result = { success: boolean; error?: string; agentId?: string; status?: string };

beforeEach(async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0 })));
afterEach(() => ctx.cleanup());

/** A headless agent spawned for real (fake server), then declared inactive as the sweep would. */
async function lostAgent(): Promise<AgentState> {
  return markLost(ctx, (await spawnHeadless(call, LEADER)).agentId);
}

/**
 * What reaches the session, in order. An abort in flight is held back until a prompt reaches the session (or 1 s
 * passed), the way a slow abort request overtaken by the resume's prompt lands.
 */
function recordSession(sessionId: string): string[] {
  const landed: string[] = [];
  const server = ctx.server;
  const abort = server.abortSession.bind(server);
  const prompt = server.promptAsync.bind(server);
  server.promptAsync = async (id, text, options) => {
    await prompt(id, text, options);
    if (id === sessionId) landed.push("prompt");
  };
  server.abortSession = async (id) => {
    const deadline = Date.now() + 1_000;
    while (id === sessionId && !landed.includes("prompt") && Date.now() < deadline) await Bun.sleep(5);
    await abort(id);
    if (id === sessionId) landed.push("abort");
  };
  return landed;
}

test("kill-agent racing resume-agent: the successor's first prompt is never followed by an abort", async () => {
  const old = await lostAgent();
  const landed = recordSession(old.sessionId);
  const [killed, resumed] = await Promise.all([
    call<Result>("kill-agent", { teamName: "alpha", agentId: old.agentId }, LEADER),
    call<Result>("resume-agent", { teamName: "alpha", agentId: old.agentId }, LEADER),
  ]);
  expect(killed.success).toBe(true);
  expect(resumed.success).toBe(true);
  expect(resumed.status).toBe("active");
  const firstPrompt = landed.indexOf("prompt");
  expect(firstPrompt).toBeGreaterThanOrEqual(0);
  expect(landed.slice(firstPrompt)).not.toContain("abort");
});

test("resume's own end of the old record still aborts the old turn, before the successor's prompt", async () => {
  const old = await lostAgent();
  const landed = recordSession(old.sessionId);
  const resumed = await call<Result>("resume-agent", { teamName: "alpha", agentId: old.agentId }, LEADER);
  expect(resumed.success).toBe(true);
  expect(landed).toEqual(["abort", "prompt"]);
});

test("kill-agent of an agent with a damaged file, resumed meanwhile: the successor's prompt is not aborted", async () => {
  const old = await lostAgent();
  // A torn file that still names its session: kill-agent ends it from its traces and writes a terminated record
  // (outcome interrupted), which resume-agent can claim before the kill's abort is sent.
  const file = ctx.store.paths.agentState("alpha", old.agentId);
  const text = await readFile(file, "utf8");
  await writeFile(file, text.slice(0, text.indexOf('"cwd"')));
  const landed = recordSession(old.sessionId);
  const server = ctx.server;
  const slowAbort = server.abortSession.bind(server);
  let resumed: Promise<Result> | undefined;
  server.abortSession = async (id) => {
    resumed ??= call<Result>("resume-agent", { teamName: "alpha", agentId: old.agentId }, LEADER);
    await slowAbort(id);
  };
  const killed = await call<Result>("kill-agent", { teamName: "alpha", agentId: old.agentId }, LEADER);
  expect(killed.success).toBe(true);
  expect(await resumed).toMatchObject({ success: true, status: "active" });
  const firstPrompt = landed.indexOf("prompt");
  expect(firstPrompt).toBeGreaterThanOrEqual(0);
  expect(landed.slice(firstPrompt)).not.toContain("abort");
});

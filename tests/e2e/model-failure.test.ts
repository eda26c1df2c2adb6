/**
 * A worker whose provider refuses (HTTP 401), for real: the fixture `opencode serve` hosts the leader and its plugin,
 * which cold-starts the project's own `opencode serve` for the headless worker; the scripted mock model answers the
 * worker with 401. Two monitors hear the error (the plugin in each server: the worker's in-process, the leader's over
 * the event stream), and the leader must be told once. The mock provider offers a second model, which resume-agent
 * moves the worker to.
 *
 * Done when (issue 42, specs/heartbeat.md "A model that fails"): one notice in the leader's session naming the agent
 * and the error, get-agent-status shows `failing`, and resume-agent { model } continues on the same session with the
 * other model, whose turn succeeds.
 */
import { afterAll, expect, test } from "bun:test";
import { processCommandLine, terminateProcess } from "../../src/edges/process-info.ts";
import { builtContext } from "../helpers/context.ts";
import { readServerInfo } from "../helpers/server-info.ts";
import {
  mockProviderConfig,
  OPENCODE_BIN,
  type OpencodeServer,
  useOpencode,
  waitFor,
} from "./harness/index.ts";
import { callTool } from "./harness/session-tools.ts";

// The default stale threshold (60 s): an idle agent that does not heartbeat is swept inactive after it.
const TIMING = { eventCoalesceMs: 300, noticeDigestMs: 0 };

const base = mockProviderConfig() as { provider: { mock: { models: Record<string, unknown> } } };
const mockProvider = base.provider.mock;
const fx = useOpencode({
  gitInit: true,
  pluginOptions: TIMING,
  env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  config: {
    provider: {
      mock: {
        ...mockProvider,
        models: {
          ...mockProvider.models,
          "mock-model-b": { tool_call: true, limit: { context: 100000, output: 4096 } },
        },
      },
    },
  },
  waitForTools: ["resume-agent"],
});

/** The project server the plugin started: stopped by pid, once checked to be an `opencode serve`. */
afterAll(async () => {
  const ctx = builtContext(fx.server.projectDir, TIMING);
  const info = (() => {
    try {
      return readServerInfo(ctx.store.paths.serverInfo(fx.server.projectDir));
    } catch {
      return undefined;
    }
  })();
  if (info && info.pid !== fx.server.pid && (await processCommandLine(info.pid))?.includes("serve")) {
    await terminateProcess(info.pid, 2_000);
  }
});

async function failureNotices(server: OpencodeServer, leaderSession: string): Promise<string[]> {
  const messages = await server.messages(leaderSession);
  return messages
    .filter((message) => message.info.role === "user")
    .flatMap((message) => message.parts.map((part) => (part.type === "text" ? part.text : "")))
    .filter((text) => text.includes("its model failed"));
}

interface Launched {
  success: boolean;
  error?: string;
  agentId: string;
  sessionId: string;
  sessionReused?: boolean;
}

test("real server: a 401 tells the leader once, get-agent-status shows it, resume-agent { model } recovers on the same session", async () => {
  const server = fx.server;
  const ctx = builtContext(server.projectDir, TIMING);
  const leader = await server.createSession("leader");
  const call = <T>(tool: string, args: Record<string, unknown>) =>
    callTool(server, leader, tool, { teamName: "fail", ...args }) as Promise<T>;
  expect(await call<{ success: boolean }>("create-team", {})).toMatchObject({ success: true });

  const spawned = await call<Launched>("spawn-agent", {
    name: "parser",
    headless: true,
    model: "mock/mock-model",
    prompt: "@@error 401 Incorrect API key provided: sk-mock",
  });
  if (!spawned.success) throw new Error(spawned.error);
  const notices = await waitFor(
    async () => {
      const found = await failureNotices(server, leader);
      return found.length > 0 ? found : undefined;
    },
    { timeoutMs: 30_000, message: "the leader's notice of the failing model" },
  );
  console.log(`notice: ${notices[0]}`);
  expect(notices[0]).toContain(`parser (${spawned.agentId})`);
  expect(notices[0]).toContain("Incorrect API key provided");
  expect(notices[0]).toContain("resume-agent");

  const status = await call<{ agents: Record<string, unknown>[] }>("get-agent-status", {
    agentId: spawned.agentId,
  });
  expect(status.agents[0]).toMatchObject({
    status: "idle",
    failing: { kind: "auth", error: expect.stringContaining("Incorrect API key provided") },
  });

  const requestsBefore = fx.mock.requests.length;
  const resumed = await call<Launched>("resume-agent", {
    agentId: spawned.agentId,
    model: "mock/mock-model-b",
    prompt: "@@say recovered on b",
  });
  if (!resumed.success) throw new Error(resumed.error);
  expect(resumed).toMatchObject({ sessionReused: true, sessionId: spawned.sessionId });
  let last: unknown;
  await waitFor(
    async () => {
      const read = await ctx.store.readAgent("fail", resumed.agentId);
      last =
        read.kind === "ok"
          ? { status: read.value.status, why: read.value.statusReason, failing: read.value.failing }
          : read.kind;
      return read.kind === "ok" && read.value.status === "idle" && !read.value.failing
        ? read.value
        : undefined;
    },
    { timeoutMs: 30_000, message: "the resumed agent idle and not failing" },
  ).catch(async (error: unknown) => {
    const said = await server.lastAssistantText(spawned.sessionId).catch(() => "?");
    console.log(`resumed agent: ${JSON.stringify(last)}; its session says: ${said}`);
    throw error;
  });
  const worker = fx.mock.requests
    .slice(requestsBefore)
    .filter((r) => r.lastUserText.includes("recovered on b"));
  expect(worker.map((r) => (r.body as { model?: string }).model)).toContain("mock-model-b");
  // Every monitor has long seen the error: still exactly one notice.
  expect(await failureNotices(server, leader)).toHaveLength(1);
}, 150_000);

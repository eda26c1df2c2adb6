/**
 * The prewarm's warm-up turn, for real (issue 42, specs/spawn-agent.md "The cold path"): the fixture `opencode serve`
 * hosts the leader and its plugin; create-team prewarms the project's own `opencode serve`, started with one provider
 * more (the plugin's local stand-in model), and one throwaway turn runs there before any agent. Shown by the plugin's
 * log and the servers' own records: the turn ran against our endpoint, nothing of it reached the scripted (user's)
 * model, the user's OPENCODE_CONFIG_CONTENT survived the merge, the session and the endpoint are gone afterwards, and
 * the first agent still works on the user's model.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { processCommandLine, terminateProcess } from "../../src/edges/process-info.ts";
import { WARMUP_PROVIDER_ID, WARMUP_PROVIDER_NAME } from "../../src/edges/warmup-config.ts";
import { WARMUP_SESSION_TITLE } from "../../src/operations/server/warmup.ts";
import { builtContext } from "../helpers/context.ts";
import { basicAuth } from "../helpers/real-server.ts";
import { readServerInfo } from "../helpers/server-info.ts";
import { OPENCODE_BIN, useOpencode, waitFor } from "./harness/index.ts";
import { callTool } from "./harness/session-tools.ts";

/** The user's own OPENCODE_CONFIG_CONTENT (JSON with a comment, as OpenCode reads it): the merge must keep it. */
const USER_CONTENT = '{\n  // the user\'s own\n  "username": "e2e-config-content"\n}';

const fx = useOpencode({
  gitInit: true,
  env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN, OPENCODE_CONFIG_CONTENT: USER_CONTENT },
  waitForTools: ["spawn-agent"],
});

function serverInfo() {
  const file = builtContext(fx.server.projectDir, {}).store.paths.serverInfo(fx.server.projectDir);
  try {
    return readServerInfo(file);
  } catch {
    return undefined;
  }
}

afterAll(async () => {
  const info = serverInfo();
  if (info && info.pid !== fx.server.pid && (await processCommandLine(info.pid))?.includes("serve")) {
    await terminateProcess(info.pid, 2_000);
  }
});

/** The plugin's lines in the leader's server log (OpenCode keeps plugin logs there), in the order written. */
function pluginLines(text: string): string[] {
  return readFileSync(fx.server.logPath, "utf8")
    .split("\n")
    .filter((line) => line.includes(text));
}

test("create-team's prewarm runs one turn on the local stand-in, never on the user's model; the first agent then works", async () => {
  const server = fx.server;
  const leader = await server.createSession("leader");
  expect(await callTool(server, leader, "create-team", { teamName: "warm" })).toMatchObject({
    success: true,
  });
  const requestsBefore = fx.mock.requests.length;
  const done = await waitFor(
    () => pluginLines("prewarm warm-up turn").find((line) => /done in \d+ ms|failed|skipped/.test(line)),
    { timeoutMs: 90_000, intervalMs: 100, message: "the warm-up turn's outcome in the plugin's log" },
  );
  console.log(done);
  expect(done).toMatch(/prewarm warm-up turn done in \d+ ms/);
  // One request, answered by our endpoint; none refused.
  expect(done).toMatch(/ requests=1 /);
  expect(done).toMatch(/ refused=0/);
  // Nothing of the warm-up reached the scripted model: no request came in while it ran, and none carries its prompt.
  expect(fx.mock.requests.length).toBe(requestsBefore);
  expect(fx.mock.requests.filter((r) => r.lastUserText.includes("single word: ok"))).toHaveLength(0);

  const info = serverInfo();
  if (!info) throw new Error("no project server recorded");
  const url = `http://127.0.0.1:${info.port}`;
  const headers = basicAuth(
    info.auth?.source === "generated"
      ? { username: info.auth.username, password: info.auth.password }
      : undefined,
  );
  const query = `directory=${encodeURIComponent(server.projectDir)}`;
  const get = async <T>(route: string): Promise<T> => {
    const response = await fetch(`${url}${route}${route.includes("?") ? "&" : "?"}${query}`, { headers });
    if (!response.ok) throw new Error(`${route}: HTTP ${response.status}`);
    return (await response.json()) as T;
  };
  // The project server's model request went to our provider (its own log says which runtime it picked).
  const projectLog = readFileSync(info.logPath, "utf8");
  expect(projectLog).toContain(`llm.provider=${WARMUP_PROVIDER_ID}`);
  expect(projectLog).not.toContain("llm.provider=mock");
  // The user's OPENCODE_CONFIG_CONTENT is kept, with our provider added to it.
  const config = await get<{
    username?: string;
    provider?: Record<string, { options?: { baseURL?: string } }>;
  }>("/config");
  expect(config.username).toBe("e2e-config-content");
  const baseURL = config.provider?.[WARMUP_PROVIDER_ID]?.options?.baseURL;
  expect(baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[\w-]+\/v1$/);
  const providers = await get<{ providers: { id: string; name: string }[] }>("/config/providers");
  expect(providers.providers.find((p) => p.id === WARMUP_PROVIDER_ID)?.name).toBe(WARMUP_PROVIDER_NAME);
  // The warm-up session is deleted and the endpoint closed.
  const sessions = await get<{ title: string }[]>("/session");
  expect(sessions.filter((s) => s.title === WARMUP_SESSION_TITLE)).toHaveLength(0);
  const closed = await fetch(`${baseURL}/chat/completions`, { method: "POST", body: "{}" }).then(
    () => "open",
    () => "closed",
  );
  expect(closed).toBe("closed");

  // The first agent works on the user's (scripted) model, in the warmed server; its shell sees the user's own
  // OPENCODE_CONFIG_CONTENT, without the provider whose endpoint is gone (the plugin put it back when it loaded there).
  const printenv = { command: "printenv OPENCODE_CONFIG_CONTENT", description: "Show the config content" };
  const spawned = (await callTool(server, leader, "spawn-agent", {
    teamName: "warm",
    headless: true,
    prompt: `@@call bash ${JSON.stringify(printenv)}\n@@say warmed`,
  })) as { success: boolean; status: string };
  expect(spawned).toMatchObject({ success: true, status: "active" });
  const afterTool = await waitFor(
    () =>
      fx.mock.requests.find(
        (r) =>
          r.lastUserText.trim().startsWith("@@call bash") && r.turnMessages.some((m) => m.role === "tool"),
      ),
    { timeoutMs: 60_000, message: "the worker's request after its shell command" },
  );
  const shellOutput = JSON.stringify(afterTool.turnMessages.filter((m) => m.role === "tool"));
  expect(shellOutput).toContain("e2e-config-content");
  expect(shellOutput).not.toContain(WARMUP_PROVIDER_ID);
  // Nothing in the project server (OpenCode, or the plugin inside it) warned about the warm-up session.
  const warmupSession = /sessionId=(ses_\w+)/.exec(done)?.[1];
  expect(warmupSession).toBeDefined();
  const warnings = readFileSync(info.logPath, "utf8")
    .split("\n")
    .filter((line) => /level=(WARN|ERROR)/.test(line) && line.includes(warmupSession ?? "?"));
  expect(warnings).toEqual([]);
}, 180_000);

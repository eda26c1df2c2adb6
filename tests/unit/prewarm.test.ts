import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { parse } from "jsonc-parser";
import type { ProjectServer, StartExtras } from "../../src/edges/server-manager.ts";
import { WARMUP_MODEL_ID, WARMUP_PROVIDER_ID } from "../../src/edges/warmup-config.ts";
import { prewarmIfAgentsRun } from "../../src/operations/server/prewarm.ts";
import { stopWarmup, WARMUP_SESSION_TITLE } from "../../src/operations/server/warmup.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { type ToolCall, toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ToolCall;
/** Opens the gate the fake server's boot waits at. */
let openGate: () => void;
let boots: number;

/** A project server boot that lasts until the test opens the gate (the real one takes seconds). */
function gatedBoot(ctx: TestContext): void {
  const ensure = ctx.edges.ensureProjectServer;
  if (!ensure) throw new Error("the test context cannot start a server");
  let gate = Promise.withResolvers<void>();
  openGate = () => gate.resolve();
  boots = 0;
  ctx.edges.ensureProjectServer = async (): Promise<ProjectServer> => {
    boots++;
    await gate.promise;
    gate = Promise.withResolvers<void>();
    gate.resolve();
    return ensure();
  };
}

beforeEach(async () => {
  ctx = await makeTestContext({ prewarmServer: true, promptRetryDelayMs: 0 });
  ctx.projectServerUp = false;
  gatedBoot(ctx);
  call = toolCaller(ctx);
});
afterEach(() => ctx.cleanup());

const LEADER = "ses_lead";
const createTeam = () => call<{ success: boolean }>("create-team", { teamName: "alpha" }, LEADER);
const spawn = () =>
  call<{ success: boolean; error?: string; status: string }>(
    "spawn-agent",
    { teamName: "alpha", prompt: "work", headless: true },
    LEADER,
  );
const logged = (text: string) => ctx.logs.filter((line) => line.message.includes(text));

describe("the project server boots before the first spawn", () => {
  test("create-team starts it in the background; a spawn during the boot joins it, no second boot", async () => {
    expect(await createTeam()).toMatchObject({ success: true });
    // create-team returned while the boot still waits at the gate.
    expect(boots).toBe(1);
    expect(ctx.projectServerUp).toBe(false);
    expect(logged("wanted by prewarm (create-team)")).toHaveLength(1);
    const spawned = spawn();
    await Bun.sleep(20);
    expect(logged("spawn-agent joins the boot under way")).toHaveLength(1);
    openGate();
    expect(await spawned).toMatchObject({ success: true, status: "active" });
    expect(boots).toBe(1);
    expect(logged("prewarm done")).toHaveLength(1);
    // Healthy is not ready: the prewarm also named the project directory once, which boots OpenCode's instance there.
    expect(ctx.server.calls.filter((c) => c === "sessionStatuses").length).toBeGreaterThanOrEqual(1);
    // Once it is up, a spawn asks ServerManager again (its quick check of the running server), alone.
    expect((await spawn()).success).toBe(true);
    expect(boots).toBe(2);
    expect(logged("joins the boot under way")).toHaveLength(1);
  });

  test("a prewarm that fails is logged; the spawn tries again and reports its own error", async () => {
    ctx.serverStartFailure = "opencode exited with code 1";
    openGate();
    expect((await createTeam()).success).toBe(true);
    await Bun.sleep(10);
    expect(logged("prewarm failed")).toHaveLength(1);
    expect((await spawn()).error).toBe("Failed to start OpenCode server: opencode exited with code 1");
    expect(boots).toBe(2);
  });

  test("off with prewarmServer: false, and inside the project server itself", async () => {
    ctx.options.prewarmServer = false;
    expect((await createTeam()).success).toBe(true);
    ctx.options.prewarmServer = true;
    ctx.edges.insideProjectServer = true;
    expect((await call<{ success: boolean }>("create-team", { teamName: "beta" }, "ses_b")).success).toBe(
      true,
    );
    await Bun.sleep(10);
    expect(boots).toBe(0);
  });
});

describe("the plugin loads in a project whose agents run", () => {
  test("running agents: it boots; none (or only ended ones): it does not", async () => {
    ctx.options.prewarmServer = false;
    await createTeam();
    ctx.options.prewarmServer = true;
    await addAgent(ctx, "alpha", { status: "terminated", outcome: "completed" });
    await prewarmIfAgentsRun(ctx);
    expect(boots).toBe(0);
    await addAgent(ctx, "alpha", { name: "parser", status: "idle" });
    await prewarmIfAgentsRun(ctx);
    expect(boots).toBe(1);
    expect(logged("wanted by prewarm (plugin loaded; agent parser of team alpha runs)")).toHaveLength(1);
    openGate();
  });
});

describe("the warm-up turn in a server the prewarm starts", () => {
  /** What the fake start was given (OPENCODE_CONFIG_CONTENT), as a real start would put it in the server's env. */
  let started: { content: string | undefined } | undefined;
  /** The user's own OPENCODE_CONFIG_CONTENT, as ServerManager hands it over. */
  const USER_CONTENT = '{"share": "disabled"}';

  beforeEach(() => {
    started = undefined;
    const ensure = ctx.edges.ensureProjectServer;
    if (!ensure) throw new Error("the test context cannot start a server");
    // The fake starts the server on the first call (asking the extras then), and finds it running afterwards.
    ctx.edges.ensureProjectServer = async (extras?: StartExtras) => {
      if (!started) started = { content: await extras?.configContent(USER_CONTENT) };
      return ensure();
    };
  });
  afterEach(() => stopWarmup(ctx));

  /** The provider the started server got: where OpenCode would send the warm-up's request. */
  function ourProvider(): { baseURL: string; apiKey: string } {
    const config = parse(started?.content ?? "{}") as {
      share?: string;
      provider?: Record<string, { options: { baseURL: string; apiKey: string } }>;
    };
    expect(config.share).toBe("disabled");
    const provider = config.provider?.[WARMUP_PROVIDER_ID];
    if (!provider) throw new Error(`no warm-up provider in ${started?.content}`);
    return provider.options;
  }

  /** What OpenCode does with the warm-up's prompt: one chat-completions request at the provider's endpoint. */
  const askEndpoint = ({ baseURL, apiKey }: { baseURL: string; apiKey: string }) =>
    fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: WARMUP_MODEL_ID, stream: true, messages: [] }),
    });

  const warmupSession = () => [...ctx.server.sessions.values()].find((s) => s.title === WARMUP_SESSION_TITLE);

  test("one session in the project root, prompted on our model, waited for and deleted; the endpoint closes", async () => {
    openGate();
    expect((await createTeam()).success).toBe(true);
    const provider = ourProvider();
    const session = await waitFor(warmupSession);
    expect(session.directory).toBe(ctx.projectRoot);
    await waitFor(() => session.prompts.length > 0);
    expect(session.prompts[0]?.model).toEqual({ providerID: WARMUP_PROVIDER_ID, modelID: WARMUP_MODEL_ID });
    expect((await askEndpoint(provider)).status).toBe(200);
    await waitFor(() => logged("prewarm warm-up turn done in").length === 1);
    expect(ctx.server.calls).toContain(`deleteSession ${session.id}`);
    expect(ctx.server.calls).not.toContain(`abortSession ${session.id}`);
    expect(warmupSession()).toBeUndefined();
    expect(logged("prewarm done")).toHaveLength(1);
    expect(
      await askEndpoint(provider).then(
        () => "open",
        () => "closed",
      ),
    ).toBe("closed");
  });

  test("a spawn during the warm-up does not wait for it; the plugin's dispose cuts the warm-up short", async () => {
    openGate();
    expect((await createTeam()).success).toBe(true);
    const session = await waitFor(warmupSession);
    await waitFor(() => session.prompts.length > 0);
    // The endpoint was never asked: the warm-up still waits for its model request while the spawn goes through.
    expect(await spawn()).toMatchObject({ success: true, status: "active" });
    expect(logged("prewarm warm-up turn done")).toHaveLength(0);
    await stopWarmup(ctx);
    expect(logged("prewarm warm-up turn failed")).toHaveLength(1);
    expect(ctx.server.calls).toContain(`abortSession ${session.id}`);
    expect(ctx.server.calls).toContain(`deleteSession ${session.id}`);
    expect(
      await askEndpoint(ourProvider()).then(
        () => "open",
        () => "closed",
      ),
    ).toBe("closed");
  });

  test("skipped, with the reason, when the user's config filters our provider out (no model: see warmup-config.test.ts)", async () => {
    openGate();
    ctx.local.settings = { enabledProviders: ["anthropic"] as string[] };
    expect((await createTeam()).success).toBe(true);
    await waitFor(() => logged("prewarm done").length === 1);
    expect(started).toEqual({ content: undefined });
    expect(logged("prewarm warm-up turn skipped: the user's enabled_providers leaves out")).toHaveLength(1);
    expect(warmupSession()).toBeUndefined();
    // Without one, the prewarm still names the project directory once (OpenCode's instance boots there).
    expect(ctx.server.calls).toContain("sessionStatuses");
  });

  test("off with prewarmTurn: false: the start is not asked for anything", async () => {
    openGate();
    ctx.options.prewarmTurn = false;
    expect((await createTeam()).success).toBe(true);
    await waitFor(() => logged("prewarm done").length === 1);
    expect(started).toEqual({ content: undefined });
    expect(ctx.local.calls).not.toContain("modelSettings");
    expect(logged("prewarm warm-up turn")).toHaveLength(0);
  });
});

async function waitFor<T>(check: () => T | undefined | false, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("waitFor timed out");
    await Bun.sleep(5);
  }
}

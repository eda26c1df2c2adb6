import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { ProjectServer } from "../../src/edges/server-manager.ts";
import { prewarmIfAgentsRun } from "../../src/operations/server/prewarm.ts";
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

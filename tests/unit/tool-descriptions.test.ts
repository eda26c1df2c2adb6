import { afterEach, describe, expect, test } from "bun:test";
import { identityText } from "../../src/operations/team/identity-prompt.ts";
import { createTools } from "../../src/plugin.ts";
import { toolDescription } from "../../src/tools/description.ts";
import { agentFixture } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolContext } from "../helpers/tools.ts";

let ctx: TestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

describe("tool descriptions guide the model", () => {
  test("every tool says when to use it, has no unfilled value, and states the numbers in force", async () => {
    ctx = await makeTestContext({ staleThresholdMs: 20_000, graceMisses: 3, shutdownTimeoutMs: 45_000 });
    const tools = createTools(ctx);
    expect(Object.keys(tools).length).toBe(19);
    for (const [name, definition] of Object.entries(tools)) {
      expect(definition.description.length, name).toBeGreaterThan(150);
      expect(definition.description, name).not.toMatch(/\{\w+\}/);
    }
    expect(tools.heartbeat?.description).toContain("about every 10 seconds");
    expect(tools.heartbeat?.description).toContain("for 20 seconds, 3 times in a row");
    expect(tools["kill-agent"]?.description).toContain("up to 45 seconds");
    // Neighbours point at each other, and the leader is told not to poll.
    expect(tools["get-agent-status"]?.description).toContain("use list-agents");
    expect(tools["list-agents"]?.description).toContain("use get-agent-status");
    expect(tools["spawn-agent"]?.description).toContain("do not poll");
    // The task board: how to plan a graph, its bounds, and how work is taken.
    expect(tools["create-task"]?.description).toContain("give tasks (up to 50) instead of title");
    expect(tools["create-task"]?.description).toContain("at most 50 others");
    expect(tools["claim-task"]?.description).toContain("never get the same task");
  });

  test("a template naming a value no option provides fails when the tools are built", async () => {
    ctx = await makeTestContext();
    expect(() => toolDescription("wait {noSuchValue} s", ctx?.options as TestContext["options"])).toThrow(
      "{noSuchValue}",
    );
  });

  test("tool results are compact JSON (tokens cost money)", async () => {
    ctx = await makeTestContext();
    const tools = createTools(ctx);
    const result = await tools["create-team"]?.execute(
      { teamName: "compact" },
      toolContext(ctx, "ses_leader", "msg_1"),
    );
    if (!result || typeof result === "string") throw new Error("expected a result object");
    expect(result.output).not.toContain("\n");
    expect(JSON.parse(result.output)).toMatchObject({ success: true, teamName: "compact" });
  });
});

describe("identity prompt", () => {
  test("the heartbeat rule is built from the options, not hard-coded", async () => {
    ctx = await makeTestContext();
    const agent = agentFixture(ctx, "t");
    const team = { leader: "leader-id" } as Parameters<typeof identityText>[1];
    const text = identityText(agent, team, { staleThresholdMs: 120_000, graceMisses: 1 });
    expect(text).toContain("about every 60 seconds");
    expect(text).toContain("for 120 seconds once you are marked inactive");
    expect(text).not.toContain("30 seconds");
  });

  test("agents are told to take work with claim-task and to come back to it after each task", async () => {
    ctx = await makeTestContext();
    const text = identityText(agentFixture(ctx, "t"), { leader: "l" } as Parameters<typeof identityText>[1], {
      staleThresholdMs: 30_000,
      graceMisses: 2,
    });
    expect(text).toContain('take work from the team\'s task board with `claim-task` {"teamName": "t"}');
    expect(text).toContain("then call `claim-task` again for the next one");
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readdir } from "node:fs/promises";
import { tool } from "@opencode-ai/plugin";
import { createTools } from "../../src/plugin.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolContext } from "../helpers/tools.ts";

// A call that names no session cannot be anyone: no tool may act for it, and above all none may make it a leader.

let ctx: TestContext;
beforeEach(async () => {
  ctx = await makeTestContext();
});
afterEach(() => ctx.cleanup());

async function callAs(name: string, args: Record<string, unknown>, sessionID: unknown) {
  const definition = createTools(ctx)[name];
  if (!definition) throw new Error(`no tool ${name}`);
  const parsed = tool.schema.object(definition.args).parse(args);
  const context = { ...toolContext(ctx, "placeholder", "msg_test"), sessionID } as ReturnType<
    typeof toolContext
  >;
  const result = await definition.execute(parsed, context);
  if (typeof result === "string") throw new Error("bare string");
  return JSON.parse(result.output) as { success: boolean; error?: string };
}

const sessionless: [string, unknown][] = [
  ["empty", ""],
  ["blank", "   "],
  ["missing", undefined],
  ["not a string", 42],
];

describe.each(sessionless)("a call with a %s sessionID", (_, sessionID) => {
  test("create-team is refused and nothing is written", async () => {
    const result = await callAs("create-team", { teamName: "alpha" }, sessionID);
    expect(result.success).toBe(false);
    expect(result.error).toContain("carries no OpenCode session id");
    expect(await readdir(ctx.store.paths.root)).toEqual([".gitignore"]);
  });

  test("every tool refuses it the same way", async () => {
    const tools = createTools(ctx);
    for (const name of Object.keys(tools)) {
      const definition = tools[name];
      if (!definition) continue;
      const context = { ...toolContext(ctx, "x", "msg_test"), sessionID } as ReturnType<typeof toolContext>;
      const raw = await definition.execute({} as never, context);
      const result = JSON.parse(typeof raw === "string" ? raw : raw.output) as {
        success: boolean;
        error?: string;
      };
      expect({ name, success: result.success }).toEqual({ name, success: false });
      expect(result.error).toContain("carries no OpenCode session id");
    }
  });
});

test("a real session still founds a team; an empty call cannot use it", async () => {
  // The one real session still works.
  expect((await callAs("create-team", { teamName: "beta" }, "ses_real")).success).toBe(true);
  const listed = await callAs("list-agents", { teamName: "beta" }, "");
  expect(listed.success).toBe(false);
});

import type { ToolContext } from "@opencode-ai/plugin";
import type { TeamsContext } from "../../src/operations/context.ts";
import { createTools } from "../../src/plugin.ts";

/** The context OpenCode hands a tool's execute, for the session `sessionID`. */
export function toolContext(ctx: TeamsContext, sessionID: string, messageID: string): ToolContext {
  return {
    sessionID,
    messageID,
    agent: "build",
    directory: ctx.projectRoot,
    worktree: ctx.projectRoot,
    abort: new AbortController().signal,
    metadata: () => {},
    ask: async () => {},
  };
}

/** A tool caller as toolCaller returns it. */
export type ToolCall = ReturnType<typeof toolCaller>;

/** Call a tool the way OpenCode does, as the session `sessionID`; returns the parsed JSON output and the title. */
export function toolCaller(ctx: TeamsContext) {
  const tools = createTools(ctx);
  return async <T = Record<string, unknown>>(
    name: string,
    args: Record<string, unknown>,
    sessionID: string,
  ): Promise<T & { title: string }> => {
    const definition = tools[name];
    if (!definition) throw new Error(`no tool ${name}`);
    // OpenCode validates arguments with the tool's schema before execute; so do we.
    const { tool } = await import("@opencode-ai/plugin");
    const parsed = tool.schema.object(definition.args).parse(args);
    const result = await definition.execute(parsed, toolContext(ctx, sessionID, "msg_test"));
    if (typeof result === "string") throw new Error(`tool ${name} returned a bare string`);
    return { ...(JSON.parse(result.output) as T), title: result.title ?? "" };
  };
}

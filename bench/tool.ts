import type { TeamsContext } from "../src/operations/context.ts";
import { createTools } from "../src/plugin.ts";
import { toolContext } from "../tests/helpers/tools.ts";

/**
 * Call the plugin's tools as OpenCode does after it validated the arguments (tests/helpers/tools.ts also validates,
 * which rebuilds the schema on every call and would be counted against the plugin here).
 */
export function benchTools(ctx: TeamsContext) {
  const tools = createTools(ctx);
  return async (
    name: string,
    args: Record<string, unknown>,
    sessionID: string,
  ): Promise<{ success: boolean }> => {
    const definition = tools[name];
    if (!definition) throw new Error(`no tool ${name}`);
    const result = await definition.execute(args as never, toolContext(ctx, sessionID, "msg_bench"));
    const output = typeof result === "string" ? result : result.output;
    return JSON.parse(output) as { success: boolean };
  };
}

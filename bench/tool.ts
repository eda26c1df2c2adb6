import type { TeamsContext } from "../src/operations/context.ts";
import { createTools } from "../src/plugin.ts";
import { toolContext } from "../tests/helpers/tools.ts";

/**
 * Call the plugin's tools as OpenCode does after it validated the arguments (tests/helpers/tools.ts also validates,
 * which rebuilds the schema on every call and would be counted against the plugin here). The answer comes back as the
 * tool's output text, as OpenCode gets it (and hands on to the model, unparsed).
 */
export function benchToolOutputs(ctx: TeamsContext) {
  const tools = createTools(ctx);
  return async (name: string, args: Record<string, unknown>, sessionID: string): Promise<string> => {
    const definition = tools[name];
    if (!definition) throw new Error(`no tool ${name}`);
    const result = await definition.execute(args as never, toolContext(ctx, sessionID, "msg_bench"));
    return typeof result === "string" ? result : result.output;
  };
}

/** benchToolOutputs, the answer parsed: for a figure whose answers are small beside what the call does. */
export function benchTools(ctx: TeamsContext) {
  const call = benchToolOutputs(ctx);
  return async (
    name: string,
    args: Record<string, unknown>,
    sessionID: string,
  ): Promise<{ success: boolean }> => JSON.parse(await call(name, args, sessionID)) as { success: boolean };
}

import { tool } from "@opencode-ai/plugin";
import { confirmShutdown } from "../operations/agents/kill.ts";
import type { TeamsContext } from "../operations/context.ts";
import confirmShutdownDescription from "./confirm-shutdown.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function confirmShutdownTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(confirmShutdownDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Your team"),
      agentId: z.string().min(1).describe("Your own agent id"),
    },
    execute: (args, context) =>
      runTool(
        "confirm-shutdown",
        ctx.log,
        () => confirmShutdown(ctx, args, context.sessionID),
        () => "Shutdown confirmed",
      ),
  });
}

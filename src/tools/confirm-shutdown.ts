import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { confirmShutdown } from "../operations/kill.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function confirmShutdownTool(ctx: TeamsContext) {
  return tool({
    description:
      "Confirm that you have finished and may be shut down, after the team leader asked you to shut down. Call it with your own teamName and agentId, then end your turn.",
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

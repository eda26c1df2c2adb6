import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { heartbeat } from "../operations/liveness/heartbeat.ts";
import { toolDescription } from "./description.ts";
import heartbeatDescription from "./heartbeat.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function heartbeatTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(heartbeatDescription, ctx.options),
    args: {
      agentId: z.string().min(1).describe("ID of the agent sending the heartbeat (your own)"),
      teamName: z.string().min(1).describe("Team the agent belongs to"),
      status: z
        .enum(["active", "idle"])
        .optional()
        .describe("Optional status override. Defaults to current status."),
      metadata: z
        .record(z.string(), z.unknown())
        .optional()
        .describe("Optional metadata (current task, progress, etc.); at most 8 kB"),
    },
    execute: (args, context) =>
      runTool(
        "heartbeat",
        ctx.log,
        () => heartbeat(ctx, args, context.sessionID),
        (result) => `Heartbeat: ${result.agentStatus}, next due by ${result.nextDeadline}`,
      ),
  });
}

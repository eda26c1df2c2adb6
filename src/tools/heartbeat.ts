import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { heartbeat } from "../operations/heartbeat.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function heartbeatTool(ctx: TeamsContext) {
  return tool({
    description:
      "Signal that you (a team agent) are alive and working. Call it about every 30 s during long work without other tool calls; an agent silent for too long is declared inactive and its tasks are handed back. Only for your own agent id.",
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

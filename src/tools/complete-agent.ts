import { tool } from "@opencode-ai/plugin";
import { completeAgent, SUMMARY_MAX } from "../operations/complete.ts";
import type { TeamsContext } from "../operations/context.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function completeAgentTool(ctx: TeamsContext) {
  return tool({
    description:
      "Report that your work as a team agent is finished (status completed) or cannot be finished (status failed), with a short summary for the team leader. Your run ends: your pane closes and you stop. The team leader may also call it for one of its agents.",
    args: {
      teamName: z.string().min(1).describe("Your team"),
      agentId: z.string().min(1).describe("Your own agent id (or, for the leader, the agent's id)"),
      status: z
        .enum(["completed", "failed"])
        .describe("completed: the work is done; failed: it cannot be done"),
      summary: z
        .string()
        .max(SUMMARY_MAX)
        .optional()
        .describe("What you did, or why it failed; the leader reads it"),
    },
    execute: (args, context) =>
      runTool(
        "complete-agent",
        ctx.log,
        () => completeAgent(ctx, args, context.sessionID),
        (result) => `${result.name} ${result.status}`,
      ),
  });
}

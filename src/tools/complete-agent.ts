import { tool } from "@opencode-ai/plugin";
import { completeAgent, SUMMARY_MAX } from "../operations/complete.ts";
import type { TeamsContext } from "../operations/context.ts";
import completeAgentDescription from "./complete-agent.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function completeAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(completeAgentDescription, ctx.options, { summaryMax: SUMMARY_MAX }),
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

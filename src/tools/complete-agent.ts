import { tool } from "@opencode-ai/plugin";
import { completeAgent, REPORT_MAX_BYTES, SUMMARY_MAX } from "../operations/agents/complete.ts";
import type { TeamsContext } from "../operations/context.ts";
import completeAgentDescription from "./complete-agent.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function completeAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(completeAgentDescription, ctx.options, {
      summaryMax: SUMMARY_MAX,
      reportMaxKb: REPORT_MAX_BYTES / 1024,
    }),
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
      report: z
        .string()
        .optional()
        .describe(
          "Your findings in full (at most 16 kB); they reach the leader's session with the completion notice",
        ),
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

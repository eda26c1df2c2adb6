import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { agentHistory } from "../operations/history/history-query.ts";
import agentHistoryDescription from "./agent-history.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function agentHistoryTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(agentHistoryDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      plan: z.string().optional().describe("Only entries for this plan"),
      status: z
        .enum(["spawned", "completed", "interrupted", "resumed", "failed", "timeout", "budget"])
        .optional()
        .describe("Only entries with this status"),
      limit: z.number().int().min(1).max(1000).optional().describe("At most this many entries"),
    },
    execute: (args, context) =>
      runTool(
        "agent-history",
        ctx.log,
        () => agentHistory(ctx, args, context.sessionID),
        (result) =>
          `${result.total} history entr${result.total === 1 ? "y" : "ies"}, ${result.active.length} active${
            result.interrupted
              ? `, ${result.interrupted.name ?? result.interrupted.agent_id} interrupted`
              : ""
          }`,
      ),
  });
}

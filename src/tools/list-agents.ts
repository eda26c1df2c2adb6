import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { HEALTH_STATUSES, LIFECYCLE_STATUSES, listAgents } from "../operations/views/list-agents.ts";
import { toolDescription } from "./description.ts";
import listAgentsDescription from "./list-agents.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function listAgentsTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(listAgentsDescription, ctx.options),
    args: {
      teamName: z.string().min(1).optional().describe("Team to list; every team you belong to when omitted"),
      grouped: z.boolean().default(true).describe("Group agents by lifecycle status"),
      statusFilter: z.enum(LIFECYCLE_STATUSES).optional().describe("Only agents with this lifecycle status"),
      healthFilter: z.enum(HEALTH_STATUSES).optional().describe("Only agents with this health status"),
      summaryOnly: z.boolean().default(false).describe("Return only the counts"),
    },
    execute: (args, context) =>
      runTool(
        "list-agents",
        ctx.log,
        () => listAgents(ctx, args, context.sessionID),
        (result) => {
          const health = Object.entries(result.summary.by_health)
            .map(([name, count]) => `${count} ${name}`)
            .join(", ");
          return `${result.summary.total} agent(s)${health ? `: ${health}` : ""}`;
        },
      ),
  });
}

import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { getAgentStatus } from "../operations/views/status.ts";
import { toolDescription } from "./description.ts";
import getAgentStatusDescription from "./get-agent-status.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function getAgentStatusTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(getAgentStatusDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Name of the team to query"),
      agentId: z
        .string()
        .optional()
        .describe("Specific agent ID to query. If omitted, returns all agents in team."),
      includeServer: z.boolean().default(false).describe("Include OpenCode server status in response"),
      includeTerminated: z.boolean().default(false).describe("Include terminated agents in results"),
    },
    execute: (args, context) =>
      runTool(
        "get-agent-status",
        ctx.log,
        () => getAgentStatus(ctx, args, context.sessionID),
        (result) => {
          const { summary } = result;
          const waiting = summary.waiting > 0 ? `, ${summary.waiting} waiting for an answer` : "";
          return `${summary.total} agent(s): ${summary.active} active, ${summary.idle} idle, ${summary.inactive} inactive${waiting}`;
        },
      ),
  });
}

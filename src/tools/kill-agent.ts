import { tool } from "@opencode-ai/plugin";
import { killAgent } from "../operations/agents/kill.ts";
import type { TeamsContext } from "../operations/context.ts";
import { toolDescription } from "./description.ts";
import killAgentDescription from "./kill-agent.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function killAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(killAgentDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      agentId: z.string().min(1).describe("Id of the agent to stop"),
      force: z.boolean().default(false).describe("Stop at once without asking the agent to finish"),
      reason: z.string().max(2_000).optional().describe("Why; shown to the agent and kept in its state"),
    },
    execute: (args, context) =>
      runTool(
        "kill-agent",
        ctx.log,
        () =>
          killAgent(ctx, args, context.sessionID, {
            signal: context.abort,
            progress: (step) => context.metadata({ title: step, metadata: { step } }),
          }),
        (result) => `Agent stopped (${result.method}, ${result.phase})`,
      ),
  });
}

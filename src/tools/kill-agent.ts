import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { killAgent } from "../operations/kill.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function killAgentTool(ctx: TeamsContext) {
  return tool({
    description:
      "Stop an agent of your team (team leader only). By default gracefully: the agent is asked to finish its step and confirm, and is stopped by force if it does not confirm in time. force: true stops it at once. Its in_progress tasks go back to pending.",
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

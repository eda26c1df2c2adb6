import { tool } from "@opencode-ai/plugin";
import { RESUME_PROMPT_MAX, resumeAgent } from "../operations/agents/resume.ts";
import type { TeamsContext } from "../operations/context.ts";
import { budgetArg } from "./budget-arg.ts";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";
import resumeAgentDescription from "./resume-agent.txt";

const z = tool.schema;

export function resumeAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(resumeAgentDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      agentId: z
        .string()
        .min(1)
        .describe("Id of the interrupted agent (see agent-history's interrupted list)"),
      prompt: z
        .string()
        .max(RESUME_PROMPT_MAX)
        .optional()
        .describe(
          "What to tell it on resuming; by default it is told it was interrupted and should continue",
        ),
      model: z
        .string()
        .optional()
        .describe(
          'Continue on this model: "provider/model", or a model id together with providerId. Defaults to the model it had.',
        ),
      providerId: z.string().optional().describe('Provider ID override (e.g., "anthropic")'),
      budget: budgetArg(
        "What the continued run may spend (counted from the resume on); required for an agent its budget stopped, else its old budget applies afresh",
      ),
    },
    execute: (args, context) =>
      runTool(
        "resume-agent",
        ctx.log,
        () =>
          resumeAgent(ctx, args, context.sessionID, (step) =>
            context.metadata({ title: step, metadata: { step } }),
          ),
        (result) =>
          `Resumed ${result.name}${result.sessionReused ? " on its old session" : " on a new session"}${
            result.status === "spawning" ? " - prompt NOT delivered" : ""
          }`,
      ),
  });
}

import { tool } from "@opencode-ai/plugin";
import { spawnAgent } from "../operations/agents/spawn.ts";
import type { TeamsContext } from "../operations/context.ts";
import { budgetArg } from "./budget-arg.ts";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";
import spawnAgentDescription from "./spawn-agent.txt";

const z = tool.schema;

export function spawnAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(spawnAgentDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Name of the team to spawn the agent into"),
      prompt: z.string().min(1).describe("Initial prompt/instructions for the new agent"),
      name: z
        .string()
        .min(1)
        .optional()
        .describe("Human-readable name for the agent (auto-generated if omitted)"),
      model: z
        .string()
        .optional()
        .describe(
          'AI model to use: "provider/model", or a model id together with providerId. Defaults to the team default.',
        ),
      providerId: z.string().optional().describe('Provider ID override (e.g., "anthropic")'),
      role: z.enum(["worker", "reviewer"]).default("worker").describe("Agent role within the team"),
      cwd: z
        .string()
        .optional()
        .describe(
          "Working directory, relative to the project root or absolute; must be inside the project and not in a nested git repository. Defaults to the project root.",
        ),
      headless: z.boolean().optional().describe("Run the agent on the server only, without a tmux pane"),
      plan: z
        .string()
        .max(100)
        .optional()
        .describe("Short name of the plan or epic this agent works under; agent-history can filter by it"),
      worktree: z
        .union([z.boolean(), z.string().min(1).max(200)])
        .optional()
        .describe(
          "Run the agent in its own git worktree: true for branch teams/<team>/<agent-name>, or a branch name. Defaults to the team's worktrees setting.",
        ),
      timeoutMinutes: z
        .number()
        .positive()
        .optional()
        .describe("How long the agent may run before it counts as timed out"),
      budget: budgetArg(
        "What the agent may spend: at 80% it is asked to wrap up and you are told, at 100% it is stopped mid-turn",
      ),
    },
    execute: (args, context) =>
      runTool(
        "spawn-agent",
        ctx.log,
        () =>
          spawnAgent(ctx, args, context.sessionID, (step) =>
            context.metadata({ title: step, metadata: { step } }),
          ),
        (result) =>
          `Spawned ${result.name} (${result.color})${result.paneId ? ` in pane ${result.paneId}` : ", headless"}${
            result.worktree ? ` on branch ${result.worktree.branch}` : ""
          }${result.status === "spawning" ? " - prompt NOT delivered" : ""}`,
      ),
  });
}

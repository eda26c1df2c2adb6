import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { mergeAgent } from "../operations/worktrees/bring-home.ts";
import { toolDescription } from "./description.ts";
import mergeAgentDescription from "./merge-agent.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function mergeAgentTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(mergeAgentDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Name of the team"),
      agentId: z.string().min(1).describe("ID of the agent whose branch to merge"),
      strategy: z
        .enum(["merge", "squash"])
        .optional()
        .describe('"merge" (a merge commit, the default) or "squash" (one commit with all of its changes)'),
      message: z
        .string()
        .max(2000)
        .optional()
        .describe("Commit message (default: Merge <branch> (agent <name>))"),
      force: z
        .boolean()
        .optional()
        .describe("Merge although the agent is still running (what it committed so far)"),
    },
    execute: (args, context) =>
      runTool(
        "merge-agent",
        ctx.log,
        () => mergeAgent(ctx, args, context.sessionID),
        (result) => `Merged ${result.branch} into ${result.into} (${result.merged.length} commit(s))`,
      ),
  });
}

import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { agentDiff } from "../operations/worktrees/bring-home.ts";
import agentDiffDescription from "./agent-diff.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function agentDiffTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(agentDiffDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Name of the agent's team"),
      agentId: z.string().min(1).describe("ID of the agent whose worktree branch to show"),
    },
    execute: (args, context) =>
      runTool(
        "agent-diff",
        ctx.log,
        () => agentDiff(ctx, args, context.sessionID),
        (result) =>
          `${result.worktree.branch}: ${result.ahead} commit(s) ahead, ${result.uncommitted.length} uncommitted file(s)`,
      ),
  });
}

import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { prewarmProjectServer } from "../operations/server/prewarm.ts";
import { createTeam } from "../operations/team/team.ts";
import { budgetArg } from "./budget-arg.ts";
import createTeamDescription from "./create-team.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function createTeamTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(createTeamDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name: 1-64 letters, digits, '-' or '_'"),
      description: z.string().optional().describe("What the team is for"),
      defaultModel: z.string().optional().describe('Default model for spawned agents, "provider/model"'),
      worktrees: z
        .boolean()
        .optional()
        .describe("Spawn every agent in its own git worktree unless spawn-agent says otherwise"),
      budget: budgetArg(
        "What all the team's agents together may spend; at 100% every running agent is stopped and spawns are refused",
      ),
      maxAgents: z
        .number()
        .optional()
        .describe("How many agents may run at once (default: the plugin option maxAgents)"),
    },
    execute: (args, context) =>
      runTool(
        "create-team",
        ctx.log,
        async () => {
          const created = await createTeam(ctx, args, context.sessionID);
          // A leader creates a team to spawn into it: the project server boots meanwhile.
          if (created.success) prewarmProjectServer(ctx, "create-team");
          return created;
        },
        (result) => `Team ${result.teamName} created; you lead it`,
      ),
  });
}

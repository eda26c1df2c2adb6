import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { answerPermission } from "../operations/liveness/answer.ts";
import answerPermissionDescription from "./answer-permission.txt";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";

const z = tool.schema;

export function answerPermissionTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(answerPermissionDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      agentId: z.string().min(1).describe("Id of the agent that waits"),
      requestId: z
        .string()
        .min(1)
        .max(200)
        .describe(
          "Id of the request you were shown: waitingFor.requestId from get-agent-status / list-agents, or the requestId in the notice",
        ),
      response: z
        .enum(["once", "always", "reject"])
        .describe("once: allow this call; always: allow calls like it for this session; reject: refuse it"),
      message: z
        .string()
        .max(4_000)
        .optional()
        .describe(
          "For a question: the answer (required unless response is reject). For a permission you reject: the reason, told to the agent",
        ),
    },
    execute: (args, context) =>
      runTool(
        "answer-permission",
        ctx.log,
        () => answerPermission(ctx, args, context.sessionID),
        (result) => `Answered ${result.kind} ${result.requestId} of ${result.agentId}: ${result.response}`,
      ),
  });
}

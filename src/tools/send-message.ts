import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { MESSAGE_MAX_BYTES, MESSAGES_PER_MINUTE, sendMessage } from "../operations/messages/messages.ts";
import { toolDescription } from "./description.ts";
import { runTool } from "./result.ts";
import sendMessageDescription from "./send-message.txt";

const z = tool.schema;

export function sendMessageTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(sendMessageDescription, ctx.options, {
      perMinute: MESSAGES_PER_MINUTE,
      maxKb: MESSAGE_MAX_BYTES / 1024,
    }),
    args: {
      teamName: z.string().min(1).describe("Your team"),
      to: z
        .string()
        .min(1)
        .describe('Recipient: an agent id, an agent name, "leader", or "all" (leader only)'),
      message: z.string().min(1).describe("What to tell the recipient"),
      wake: z
        .boolean()
        .optional()
        .describe("false: an idle recipient reads it on its next turn instead of starting one now"),
    },
    execute: (args, context) =>
      runTool(
        "send-message",
        ctx.log,
        () => sendMessage(ctx, args, context.sessionID),
        (result) => `Message to ${result.deliveries.map((d) => `${d.name} (${d.delivery})`).join(", ")}`,
      ),
  });
}

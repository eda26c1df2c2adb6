import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { READ_LIMIT_DEFAULT, READ_LIMIT_MAX, readMessages } from "../operations/messages/inbox.ts";
import { toolDescription } from "./description.ts";
import readMessagesDescription from "./read-messages.txt";
import { runTool } from "./result.ts";

const z = tool.schema;

export function readMessagesTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(readMessagesDescription, ctx.options, {
      limitMax: READ_LIMIT_MAX,
      keepRead: ctx.options.inboxKeepRead,
      limitDefault: READ_LIMIT_DEFAULT,
    }),
    args: {
      teamName: z.string().min(1).describe("Your team"),
      unreadOnly: z.boolean().optional().describe("Only messages no earlier read-messages returned"),
      from: z
        .string()
        .min(1)
        .optional()
        .describe('Only messages from this sender: an agent id, a name, "leader" or "opencode-teams"'),
      limit: z
        .number()
        .int()
        .min(1)
        .max(READ_LIMIT_MAX)
        .optional()
        .describe(`How many to return, newest first (default ${READ_LIMIT_DEFAULT})`),
    },
    execute: (args, context) =>
      runTool(
        "read-messages",
        ctx.log,
        () => readMessages(ctx, args, context.sessionID),
        (result) => `${result.messages.length} message(s), ${result.unread} more unread`,
      ),
  });
}

import { tool } from "@opencode-ai/plugin";

const z = tool.schema;

/** A budget argument; its values are checked by the operation, whose errors say what to give instead. */
export function budgetArg(describe: string) {
  return z
    .object({
      usd: z.number().optional().describe("US dollars, as OpenCode prices the model's tokens"),
      tokens: z.number().optional().describe("Tokens of every kind (input, output, reasoning, cache) summed"),
    })
    .optional()
    .describe(describe);
}

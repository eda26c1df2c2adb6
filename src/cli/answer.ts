import type { TeamsContext } from "../operations/context.ts";
import { answerPermissionAsHuman, type PermissionResponse } from "../operations/liveness/waiting.ts";

export const ANSWER_USAGE = `  opencode-teams approve <team> <agent> [--always] [--message <text>]   allow what the agent waits on
  opencode-teams deny <team> <agent>                                    refuse it`;

/** `approve` / `deny`: the human answers an agent's pending permission request or question. Returns the exit code. */
export async function runAnswer(
  ctx: TeamsContext,
  command: "approve" | "deny",
  positionals: readonly string[],
  flags: { always: boolean; message?: string; request?: string },
  print: (text: string) => void,
): Promise<number> {
  const [teamName, agentId] = positionals;
  if (!teamName || !agentId) {
    print(`usage:\n${ANSWER_USAGE}`);
    return 2;
  }
  const response: PermissionResponse = command === "deny" ? "reject" : flags.always ? "always" : "once";
  const result = await answerPermissionAsHuman(ctx, {
    teamName,
    agentId,
    response,
    ...(flags.message !== undefined ? { message: flags.message } : {}),
  });
  if (!result.success) {
    print(`opencode-teams: ${result.error}`);
    return 1;
  }
  print(`Answered ${result.kind} ${result.requestId} of ${result.agentId}: ${result.response}`);
  return 0;
}

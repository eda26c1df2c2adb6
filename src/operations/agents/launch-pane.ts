import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import { type AgentPane, closeAgentPane, openAgentPane, paneOwner } from "./agent-pane.ts";
import type { Launching, LaunchSpec } from "./launch-spec.ts";
import { type Rollback, StepFailure } from "./rollback.ts";

/** Opens the agent's pane on first call (and registers its undo); later calls return the same pane. */
export function paneOpener(
  ctx: TeamsContext,
  spec: LaunchSpec,
  up: Launching,
  rollback: Rollback,
): { open: () => Promise<AgentPane>; settled: () => Promise<void> } {
  // One opening however many callers ask (the delivery's early start, its pane fallback, the launch itself).
  let opening: Promise<AgentPane> | undefined;
  const open = async (): Promise<AgentPane> => {
    let opened: AgentPane;
    try {
      opened = await openAgentPane(ctx, {
        teamName: spec.team.name,
        agentId: up.agentId,
        name: up.name,
        role: spec.role,
        color: up.color,
        sessionId: up.sessionId,
        cwd: up.cwd,
        serverUrl: up.server.url,
        credentials: up.server.credentials,
      });
    } catch (error) {
      throw new StepFailure(`Failed to create tmux pane: ${errorText(error)}`);
    }
    rollback.push("the pane", () => closeAgentPane(ctx, paneOwner(up.sessionId, opened)));
    return opened;
  };
  return {
    open: () => {
      opening ??= open();
      return opening;
    },
    // A rollback must wait for an opening under way: the pane's undo is pushed only once it is open.
    settled: async () => {
      await opening?.catch(() => undefined);
    },
  };
}

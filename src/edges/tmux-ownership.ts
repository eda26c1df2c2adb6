// Whose a pane is: what tmux is asked to print about a pane, and the condition tmux itself checks before it acts on one.
import type { PaneRef } from "./tmux-api.ts";

/** Identity of a tmux server: its pid and start time (seconds) differ after a restart, when pane ids start over. */
export const SERVER_FORMAT = "#{pid}:#{start_time}";
/** What decides whose a pane is; `@agent_id` last, as a user could set it to anything (tabs included). */
export const OWNER_FORMAT = `#{pane_id}\t#{pane_dead}\t${SERVER_FORMAT}\t#{@agent_id}`;
/** Printed by the checked action (see ifOwned) when the pane was the agent's and the action ran. */
export const OWNED_MARK = "oct-owned";

export interface OwnerLine {
  paneId: string;
  dead: boolean;
  server: string;
  agentId: string;
}

export function parseOwnerLine(line: string): OwnerLine | undefined {
  const [paneId, dead, server, ...agentId] = line.split("\t");
  if (paneId === undefined || dead === undefined || server === undefined) return undefined;
  return { paneId, dead: dead !== "0", server, agentId: agentId.join("\t") };
}

/**
 * The tmux format that is true only while the pane is the agent's (see PaneRef), or undefined when a recorded value
 * is not of the shape we write (a damaged record): such values never go into a tmux command, and the pane is
 * treated as not the agent's.
 */
export function ownershipCondition(ref: PaneRef): string | undefined {
  if (!/^%\d+$/.test(ref.paneId) || !/^[A-Za-z0-9_-]+$/.test(ref.agentId)) return undefined;
  if (ref.server !== undefined && !/^\d+:\d+$/.test(ref.server)) return undefined;
  const checks = [
    `#{==:#{pane_id},${ref.paneId}}`,
    `#{==:#{@agent_id},${ref.agentId}}`,
    ...(ref.server === undefined ? [] : [`#{==:${SERVER_FORMAT},${ref.server}}`]),
  ];
  return checks.reduce((all, check) => `#{&&:${all},${check}}`);
}

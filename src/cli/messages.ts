import type { TeamsContext } from "../operations/context.ts";
import { listInbox, viewOf } from "../operations/messages/inbox.ts";
import { HUMAN, sendAs } from "../operations/messages/messages.ts";
import { loadTeam } from "../operations/team/identity.ts";
import type { TeamConfig } from "../state/schemas.ts";
import { type Cell, localTime, type Painter, renderTable, renderWarnings } from "./format.ts";

/** `opencode-teams send <team> <to> <message...>`: a message from `human`, delivered like send-message's. */
export async function cliSend(ctx: TeamsContext, teamName: string, to: string, words: string[]) {
  const team = await loadTeam(ctx, teamName);
  return sendAs(ctx, team, HUMAN, { to, message: words.join(" ") });
}

/** What `send` did, as a sentence: who got it now, and who gets it later. */
export function sentSentence(sent: { deliveries: { name: string; delivery: string }[] }): string {
  const by = (kind: string) => sent.deliveries.filter((d) => d.delivery === kind).map((d) => d.name);
  const parts = [
    by("prompted").length > 0 ? `delivered to ${by("prompted").join(", ")}` : "",
    by("queued").length > 0
      ? `queued for ${by("queued").join(", ")} (they read it when their turn ends)`
      : "",
    by("stored").length > 0
      ? `kept in the inbox of ${by("stored").join(", ")} (delivered when they next run)`
      : "",
  ].filter(Boolean);
  return `Message sent: ${parts.join("; ")}.`;
}

/** `opencode-teams inbox <team> [agent]`: an agent's inbox, newest first; nothing is marked read. */
export async function collectInbox(ctx: TeamsContext, team: TeamConfig, agentId: string) {
  const { items, warnings } = await listInbox(ctx, team, agentId);
  return { team: team.name, agentId, messages: items.map(viewOf), warnings };
}

export function renderInbox(view: Awaited<ReturnType<typeof collectInbox>>, paint: Painter): string {
  if (view.messages.length === 0) return `The inbox of ${view.agentId} in team '${view.team}' is empty.`;
  const rows: Cell[][] = view.messages.map((m) => [
    { text: localTime(m.time) },
    { text: m.fromName ?? m.from },
    { text: m.type },
    { text: m.delivered ? "yes" : "no", style: m.delivered ? undefined : "yellow" },
    { text: m.read ? "yes" : "no" },
    // Line breaks read as spaces here; the cell escapes whatever else could draw on the terminal.
    { text: m.text.replace(/[ \t\n]+/g, " "), max: 70 },
  ]);
  const table = renderTable(
    ["TIME", "FROM", "TYPE", "DELIVERED", "READ", "TEXT"],
    rows,
    paint,
    `opencode-teams inbox ${view.team} ${view.agentId} --json`,
  );
  return [table, ...renderWarnings(view.warnings, paint)].join("\n");
}

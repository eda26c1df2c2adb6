import { isoNow } from "../../clock.ts";
import type { ColorAssignment, ColorPool } from "../../state/color-store.ts";
import type { TeamsContext } from "../context.ts";

/** Ten colors every terminal and tmux know by name; the leader is "white", outside the pool. */
export const COLOR_PALETTE = [
  "blue",
  "green",
  "magenta",
  "cyan",
  "yellow",
  "red",
  "brightblue",
  "brightgreen",
  "brightmagenta",
  "brightcyan",
] as const;

/** Released assignments kept for least-recently-used choices; older ones carry no information. */
const RELEASED_KEPT = 50;

export interface ColorChoice {
  color: string;
  warning?: string;
}

function lastUse(assignments: ColorAssignment[], color: string): number {
  let latest = 0;
  for (const a of assignments) {
    if (a.color !== color) continue;
    latest = Math.max(latest, Date.parse(a.releasedAt ?? a.assignedAt));
  }
  return latest;
}

function prune(assignments: ColorAssignment[]): ColorAssignment[] {
  const active = assignments.filter((a) => !a.releasedAt);
  const released = assignments
    .filter((a) => a.releasedAt)
    .sort((a, b) => Date.parse(b.releasedAt ?? "") - Date.parse(a.releasedAt ?? ""))
    .slice(0, RELEASED_KEPT);
  return [...active, ...released];
}

/**
 * How long an assignment without an agent file still counts as held: spawn allocates the color while it creates the
 * session, before the agent's file exists, and a spawn's bring-up (worktree, server start, session) ends well within.
 */
const UNWRITTEN_HOLDER_GRACE_MS = 10 * 60_000;

/** Whether the agent holding an assignment has stopped running (or is gone), so its color may be taken. */
async function holderStopped(ctx: TeamsContext, assignment: ColorAssignment): Promise<boolean> {
  try {
    const read = await ctx.store.readAgent(assignment.teamName, assignment.agentId);
    if (read.kind === "missing")
      return ctx.clock.now() - Date.parse(assignment.assignedAt) > UNWRITTEN_HOLDER_GRACE_MS;
    if (read.kind !== "ok") return true;
    return read.value.status === "terminated" || read.value.status === "inactive";
  } catch {
    // A team or agent id that no longer makes a valid path: nobody holds it.
    return true;
  }
}

/**
 * Give `agentId` a color, under the pool's cross-process lock so concurrent spawns get distinct ones. A free color is
 * the one unused for longest. When all ten are held, the color of the longest-held assignment whose agent is no
 * longer running is taken over; if every holder still runs, the longest-held color is shared. Both come with a warning.
 */
export async function allocateColor(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<ColorChoice> {
  const now = isoNow(ctx.clock);
  let choice: ColorChoice | undefined;
  // Not flushed: the launch flushes the pool once the agent's first turn began, before it returns (see reserveMember).
  const damage = await ctx.store.colors.update(
    async (current): Promise<ColorPool> => {
      const assignments = prune(current?.assignments ?? []);
      const held = new Set(assignments.filter((a) => !a.releasedAt).map((a) => a.color));
      const free = COLOR_PALETTE.filter((color) => !held.has(color));
      let next = assignments;
      if (free.length > 0) {
        // Stable sort: among never-used colors the palette order decides.
        const color = [...free].sort(
          (a, b) => lastUse(assignments, a) - lastUse(assignments, b),
        )[0] as string;
        choice = { color };
      } else {
        const byAge = assignments
          .filter((a) => !a.releasedAt)
          .sort((a, b) => Date.parse(a.assignedAt) - Date.parse(b.assignedAt));
        let reclaimed: ColorAssignment | undefined;
        for (const candidate of byAge) {
          if (await holderStopped(ctx, candidate)) {
            reclaimed = candidate;
            break;
          }
        }
        if (reclaimed) {
          const taken = reclaimed;
          next = assignments.map((a) => (a === taken ? { ...a, releasedAt: now } : a));
          choice = {
            color: taken.color,
            warning: `All ${COLOR_PALETTE.length} colors were in use; reused '${taken.color}' from agent ${taken.agentId}, which is no longer running.`,
          };
        } else {
          const oldest = byAge[0] as ColorAssignment;
          choice = {
            color: oldest.color,
            warning: `All ${COLOR_PALETTE.length} colors are held by running agents; '${oldest.color}' is now shared with agent ${oldest.agentId}.`,
          };
        }
      }
      return {
        version: 1,
        assignments: [...next, { color: choice.color, agentId, teamName, assignedAt: now }],
      };
    },
    { durable: false, blocking: true },
  );
  if (!choice) throw new Error("color pool update did not run");
  // A damaged pool starts over empty: the store's warnings say so, like any damaged file (specs/storage.md).
  const warning = [...damage, ...(choice.warning ? [choice.warning] : [])].join(" ");
  return warning ? { color: choice.color, warning } : { color: choice.color };
}

/** Hand an agent's color back. Idempotent. Returns warnings (a damaged pool, moved aside). */
export async function releaseColor(ctx: TeamsContext, agentId: string): Promise<string[]> {
  const now = isoNow(ctx.clock);
  return ctx.store.colors.update((current) => {
    if (!current?.assignments.some((a) => a.agentId === agentId && !a.releasedAt)) return undefined;
    return {
      ...current,
      assignments: current.assignments.map((a) =>
        a.agentId === agentId && !a.releasedAt ? { ...a, releasedAt: now } : a,
      ),
    };
  });
}

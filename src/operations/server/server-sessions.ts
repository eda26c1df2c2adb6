import { ServerInfoSchema } from "../../state/schemas.ts";
import { updateJson } from "../../state/store.ts";
import type { TeamsContext } from "../context.ts";
import { isRunning } from "../liveness/heartbeat.ts";

/**
 * Set ServerInfo.activeSessions to the number of running agents. Counted from the agent files rather than adjusted by
 * +1/-1, so a crash between a spawn and its bookkeeping cannot leave the count wrong for good. No-op without ServerInfo.
 */
export async function recountActiveSessions(ctx: TeamsContext): Promise<number | undefined> {
  const outcome = await updateJson(
    ctx.store.paths.serverInfo(ctx.projectRoot),
    ServerInfoSchema,
    async (info) => {
      if (!info) return undefined;
      let count = 0;
      for (const teamName of await ctx.store.listTeamNames()) {
        const { items } = await ctx.store.listAgentViews(teamName);
        count += items.filter((view) => view.state.role !== "leader" && isRunning(view.state.status)).length;
      }
      return count === info.activeSessions ? undefined : { ...info, activeSessions: count };
    },
    ctx.store.lockTiming,
    // Recounted from the agent files on every change: a count lost to a power cut is put right by the next one.
    { durable: false },
  );
  return outcome.value?.activeSessions;
}

import { listUnknownAgents } from "../agents/unknown-agents.ts";
import { warnCaller } from "../call-warnings.ts";
import type { TeamsContext } from "../context.ts";
import { isRunning } from "../liveness/heartbeat.ts";

/**
 * Set ServerInfo.activeSessions to the number of running agents (a damaged agent file: by its last known status). Counted from the agent files rather than adjusted by
 * +1/-1, so a crash between a spawn and its bookkeeping cannot leave the count wrong for good. No-op without ServerInfo.
 */
export async function recountActiveSessions(ctx: TeamsContext): Promise<number | undefined> {
  const outcome = await ctx.store.serverInfo.update(
    ctx.projectRoot,
    async (info) => {
      if (!info) return undefined;
      let count = 0;
      for (const teamName of await ctx.store.listTeamNames()) {
        const { items } = await ctx.store.listAgentViews(teamName);
        count += items.filter((view) => view.state.role !== "leader" && isRunning(view.state.status)).length;
        // An agent whose file is damaged counts as listings show it: under its last known status.
        const { agents } = await listUnknownAgents(ctx, teamName);
        count += agents.filter((agent) => agent.role !== "leader" && isRunning(agent.status)).length;
      }
      return count === info.activeSessions ? undefined : { ...info, activeSessions: count };
    },
    // Recounted from the agent files on every change: a count lost to a power cut is put right by the next one.
    { durable: false },
  );
  // A damaged record was moved aside (no server is recorded now): the call that recounted says so.
  for (const warning of outcome.warnings) warnCaller(warning);
  return outcome.value?.activeSessions;
}

import type { TeamsContext } from "./context.ts";
import { isRunning } from "./heartbeat.ts";

/**
 * The plugin is going away (its `dispose`): stop the project server if this process started it and no agent of the
 * project still runs on it, so a server is never left behind with nobody to stop it. A server another process
 * started, or one with live agents, stays (`opencode-teams server stop` ends it by hand).
 */
export async function releaseProjectServer(ctx: TeamsContext): Promise<void> {
  const control = ctx.edges.serverControl;
  if (!control || !(await control.startedByThisProcess())) return;
  for (const teamName of await ctx.store.listTeamNames()) {
    const { items } = await ctx.store.listAgentViews(teamName);
    const live = items.find((view) => view.state.role !== "leader" && isRunning(view.state.status));
    if (live) {
      ctx.log("info", "project server left running: agents still use it", {
        agent: live.state.name,
        teamName,
      });
      return;
    }
  }
  const outcome = await control.stop(
    "the plugin that started it was disposed and no agent of the project runs",
  );
  ctx.log("info", `project server: ${outcome.detail}`);
}

import { listUnknownAgents } from "../agents/unknown-agents.ts";
import type { TeamsContext } from "../context.ts";
import { isRunning } from "../liveness/heartbeat.ts";

/**
 * A running agent of the project (any team), or undefined when none runs. An agent whose state file is damaged may
 * run whatever its last known status says, unless that is terminated: stopping the server under it would end its work.
 */
export async function runningAgent(
  ctx: TeamsContext,
): Promise<{ agent: string; teamName: string } | undefined> {
  for (const teamName of await ctx.store.listTeamNames()) {
    const { items } = await ctx.store.listAgentViews(teamName);
    const live = items.find((view) => view.state.role !== "leader" && isRunning(view.state.status));
    if (live) return { agent: live.state.name, teamName };
    const { agents } = await listUnknownAgents(ctx, teamName);
    const damaged = agents.find((agent) => agent.role !== "leader" && agent.status !== "terminated");
    if (damaged) return { agent: damaged.name ?? damaged.agentId, teamName };
  }
  return undefined;
}

/**
 * The plugin is going away (its `dispose`): stop the project server if this process started it and no agent of the
 * project still runs on it, so a server is never left behind with nobody to stop it. A server another process
 * started, or one with live agents, stays (`opencode-teams server stop` ends it by hand). The agents are counted
 * again under the server's start lock right before the signal, as another process may have spawned one meanwhile.
 */
export async function releaseProjectServer(ctx: TeamsContext): Promise<void> {
  const control = ctx.edges.serverControl;
  if (!control || !(await control.startedByThisProcess())) return;
  const live = await runningAgent(ctx);
  if (live) {
    ctx.log("info", "project server left running: agents still use it", live);
    return;
  }
  const outcome = await control.stop(
    "the plugin that started it was disposed and no agent of the project runs",
    async () => (await runningAgent(ctx)) === undefined,
  );
  ctx.log("info", `project server: ${outcome.detail}`);
}

import { finishAgent } from "../agents/finish.ts";
import type { TeamsContext } from "../context.ts";
import { notifyLeader } from "../messages/notify.ts";
import { isRunning } from "./heartbeat.ts";

function minutes(n: number): string {
  return `${n} minute${n === 1 ? "" : "s"}`;
}

/**
 * End the agents that ran past their spawn-time `timeoutMinutes` (counted from the start of their run; a resumed run
 * gets the limit afresh): aborted, tasks handed back, history "timeout", one notice per team to the leader. Runs after
 * each stale sweep; when two processes race, only the one whose write ended the run reports it.
 */
export async function enforceTimeouts(ctx: TeamsContext): Promise<number> {
  const now = ctx.clock.now();
  let ended = 0;
  for (const teamName of await ctx.store.listTeamNames()) {
    const { items } = await ctx.store.listAgentViews(teamName);
    const overdue = items
      .map((view) => view.state)
      .filter(
        (agent) =>
          agent.timeoutMinutes !== undefined &&
          isRunning(agent.status) &&
          now - Date.parse(agent.createdAt) > agent.timeoutMinutes * 60_000,
      );
    if (overdue.length === 0) continue;
    const lines: string[] = [];
    for (const agent of overdue) {
      const limit = minutes(agent.timeoutMinutes ?? 0);
      const finished = await finishAgent(ctx, agent, {
        reason: `ran longer than its time limit of ${limit}`,
        outcome: "timeout",
        history: "timeout",
      });
      if (!finished.ended) continue;
      ended++;
      lines.push(
        `Agent ${agent.name} (${agent.agentId}) timed out after ${limit} and was stopped. Tasks returned to pending: ${
          finished.reassignedTasks.length > 0 ? finished.reassignedTasks.join(", ") : "none"
        }. resume-agent can continue it.${finished.worktreeKept.map((kept) => `\n${kept}.`).join("")}`,
      );
    }
    if (lines.length === 0) continue;
    const team = await ctx.store.readTeam(teamName);
    if (team.kind !== "ok") continue;
    await notifyLeader(ctx, team.value, { type: "agent_timeout", text: lines.join("\n") }).catch(
      (error: unknown) => {
        ctx.log("error", "could not notify the leader of timed-out agents", {
          team: teamName,
          error: error instanceof Error ? error.message : String(error),
        });
      },
    );
  }
  return ended;
}

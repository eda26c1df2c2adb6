import { isoNow } from "../../clock.ts";
import type { Task } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import type { OpResult } from "../result.ts";
import { loadTeam, requireMember } from "./identity.ts";
import { type TaskView, taskView } from "./task.ts";
import { TaskGraph } from "./task-graph.ts";
import { boardWarnings, callerRefusal, ownerRefusal, readCaller } from "./task-rules.ts";

export interface ClaimTaskOutput {
  task: TaskView | null;
  /** When nothing was ready: what the open tasks wait for, so the caller knows whether to wait or stop. */
  note?: string;
  warnings?: string[];
}

/** The task claim-task hands out: the oldest ready task reserved for the caller, else the oldest unreserved one. */
function nextFor(graph: TaskGraph, agentId: string): Task | undefined {
  let unreserved: Task | undefined;
  for (const task of graph.tasks) {
    if (!graph.isReady(task) || graph.byId.get(task.id) !== task) continue;
    if (task.assignee === agentId) return task;
    if (task.assignee === null) unreserved ??= task;
  }
  return unreserved;
}

function nothingReady(graph: TaskGraph): string {
  const pending = graph.tasks.filter((task) => task.status === "pending");
  if (pending.length === 0) return "No pending task is left on the board.";
  const blocked = pending.filter((task) => graph.openBlockers(task).length > 0);
  const reserved = pending.length - blocked.length;
  const parts = [
    blocked.length > 0 ? `${blocked.length} wait for other tasks to complete` : "",
    reserved > 0 ? `${reserved} are reserved for other agents` : "",
  ].filter(Boolean);
  return `Nothing is ready for you: of ${pending.length} pending task(s), ${parts.join(" and ")}. A message tells you when a task reserved for you becomes ready; otherwise report to the leader and wait.`;
}

/**
 * Hand the caller the next ready task and mark it in progress, in one write under the board's lock: two agents asking
 * at once, in any processes, never get the same task.
 */
export async function claimTask(
  ctx: TeamsContext,
  input: { teamName: string },
  sessionId: string,
): Promise<OpResult<ClaimTaskOutput>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  let claimed: TaskView | undefined;
  let note: string | undefined;
  let refusal: string | undefined;
  const { warnings } = await ctx.store.updateTasks(team.name, async (board) => {
    const self = await readCaller(ctx, team, caller);
    refusal =
      (await callerRefusal(ctx, team, caller, true, self)) ??
      (await ownerRefusal(ctx, team, caller.agentId, self));
    if (refusal) return undefined;
    const graph = new TaskGraph(board.tasks);
    const task = nextFor(graph, caller.agentId);
    if (!task) {
      note = nothingReady(graph);
      return undefined;
    }
    const taken: Task = {
      ...task,
      status: "in_progress",
      assignee: caller.agentId,
      updatedAt: isoNow(ctx.clock),
    };
    const tasks = board.tasks.map((candidate) => (candidate === task ? taken : candidate));
    // Its edges did not change, so the graph read before the claim still says what it blocks.
    claimed = taskView(graph, taken);
    return { ...board, tasks };
  });
  if (refusal) return { success: false, error: refusal };
  return {
    success: true,
    task: claimed ?? null,
    ...(note ? { note } : {}),
    ...boardWarnings(warnings),
  };
}

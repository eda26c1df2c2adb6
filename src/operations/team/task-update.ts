import { boundText, ECHO_MAX } from "../../bounded-text.ts";
import { isoNow } from "../../clock.ts";
import type { Task, TaskBoard, TaskStatus, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, type OpResult } from "../result.ts";
import { type Caller, loadTeam, requireMember } from "./identity.ts";
import { type TaskView, taskView } from "./task.ts";
import { announceChange, type BoardChange, boardChange } from "./task-events.ts";
import { checkBlockerList, checkGraph, FINAL_STATUSES, TaskGraph } from "./task-graph.ts";
import {
  assertMemberId,
  boardWarnings,
  callerRefusal,
  type KnownAgent,
  ownerRefusal,
  readCaller,
} from "./task-rules.ts";

const ORDER: Record<TaskStatus, number> = {
  pending: 0,
  in_progress: 1,
  completed: 2,
  failed: 2,
  cancelled: 2,
};

export const REASON_MAX = 2_000;

export interface UpdateTaskInput {
  teamName: string;
  taskId: string;
  status?: TaskStatus;
  assignee?: string;
  blockedBy?: string[];
  reason?: string;
}

export type UpdateTaskOutput = {
  task: TaskView;
  nowReady?: string[];
  stuck?: BoardChange["stuck"];
  warnings?: string[];
};

/** Refuses input that is incomplete in itself, before the board is read. */
function checkInput(input: UpdateTaskInput, team: TeamConfig): void {
  if (input.status === undefined && input.assignee === undefined && input.blockedBy === undefined) {
    throw new CallerError("Give at least one of status, assignee or blockedBy; nothing was changed.");
  }
  const ending = input.status === "failed" || input.status === "cancelled";
  if (ending && !input.reason?.trim()) {
    throw new CallerError(
      `Say why the task is ${input.status} in reason (the leader reads it). Nothing was changed.`,
    );
  }
  if (!ending && input.reason !== undefined) {
    throw new CallerError("reason goes with status failed or cancelled only. Nothing was changed.");
  }
  if ((input.reason?.length ?? 0) > REASON_MAX) {
    throw new CallerError(`reason is over ${REASON_MAX} characters; say it shorter. Nothing was changed.`);
  }
  if (input.assignee !== undefined) assertMemberId(team, input.assignee);
  if (input.blockedBy !== undefined) checkBlockerList(input.taskId, input.blockedBy);
}

/** The one task `taskId` names on the board; refuses an unknown id and one the board holds more than once. */
function findTask(ctx: TeamsContext, board: TaskBoard, team: TeamConfig, taskId: string): Task {
  const matches = board.tasks.filter((candidate) => candidate.id === taskId);
  const task = matches[0];
  if (!task) {
    throw new CallerError(
      `Task '${boundText(taskId, ECHO_MAX)}' not found in team '${team.name}' (list-tasks shows its board).`,
    );
  }
  if (matches.length > 1) {
    throw new CallerError(
      `Task id '${task.id}' is on the board of team '${team.name}' ${matches.length} times (the board was edited by hand or an older copy was put back), so which task you mean is unclear. Nothing was changed: ask the user to give each of them its own id in ${ctx.store.paths.tasks(team.name)}, then retry.`,
    );
  }
  return task;
}

/** The task after the update, or a CallerError saying why it may not happen. Runs under the board's lock. */
async function changedTask(
  ctx: TeamsContext,
  team: TeamConfig,
  caller: Caller,
  self: KnownAgent,
  task: Task,
  graph: TaskGraph,
  input: UpdateTaskInput,
): Promise<Task> {
  const status = input.status ?? task.status;
  if (ORDER[status] < ORDER[task.status] || (FINAL_STATUSES.has(task.status) && status !== task.status)) {
    throw new CallerError(
      `Task '${task.id}' is ${task.status}; a task's status only moves forward (pending -> in_progress -> completed, failed or cancelled) and a finished task stays finished. Create a new task for more work.`,
    );
  }
  if (!caller.isLeader && task.assignee !== null && task.assignee !== caller.agentId) {
    throw new CallerError(
      `Task '${task.id}' is assigned to agent '${task.assignee}'; only that agent or the leader may update it`,
    );
  }
  if (input.blockedBy !== undefined && task.status !== "pending") {
    throw new CallerError(
      `Task '${task.id}' is ${task.status}: only a pending task's blockedBy can change. Nothing was changed.`,
    );
  }
  const blockedBy = input.blockedBy === undefined ? task.blockedBy : [...new Set(input.blockedBy)];
  const open = graph.openBlockers({ ...task, blockedBy });
  if (task.status === "pending" && (status === "in_progress" || status === "completed") && open.length > 0) {
    throw new CallerError(
      `Task '${task.id}' waits for ${graph.describeBlockers(open)}: it cannot start or complete before they are completed. Take a ready task with claim-task, or ask the leader to re-point it (update-task blockedBy).`,
    );
  }
  // Starting an unowned task claims it for the caller.
  const assignee =
    input.assignee ?? (status === "in_progress" && task.assignee === null ? caller.agentId : task.assignee);
  // Whoever ends up owning unfinished work must be running to do it (or to have it handed back when it dies).
  if (!FINAL_STATUSES.has(status) && assignee !== null) {
    const refusal = await ownerRefusal(ctx, team, assignee, self);
    if (refusal) throw new CallerError(refusal);
  }
  const { reason: _oldReason, ...rest } = task;
  return {
    ...rest,
    status,
    assignee,
    blockedBy,
    updatedAt: isoNow(ctx.clock),
    ...(input.reason !== undefined ? { reason: input.reason.trim() } : {}),
  };
}

export async function updateTask(
  ctx: TeamsContext,
  input: UpdateTaskInput,
  sessionId: string,
): Promise<OpResult<UpdateTaskOutput>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  checkInput(input, team);
  let result: { task: TaskView; change: BoardChange } | undefined;
  let refusal: string | undefined;
  let self: KnownAgent | undefined;
  const { warnings } = await ctx.store.updateTasks(team.name, async (board) => {
    self = await readCaller(ctx, team, caller);
    refusal = await callerRefusal(ctx, team, caller, input.status === "in_progress", self);
    if (refusal) return undefined;
    const task = findTask(ctx, board, team, input.taskId);
    const before = new TaskGraph(board.tasks);
    const updated = await changedTask(ctx, team, caller, self, task, before, input);
    const tasks = board.tasks.map((candidate) => (candidate.id === task.id ? updated : candidate));
    const after = new TaskGraph(tasks);
    if (input.blockedBy !== undefined) checkGraph(after, team.name, [updated]);
    result = { task: taskView(after, updated), change: boardChange(before, after) };
    return { ...board, tasks };
  });
  if (refusal) return { success: false, error: refusal };
  if (!result) throw new Error("task board update did not run");
  const { task, change } = result;
  const callerName = caller.isLeader ? "the leader" : (self?.agent?.name ?? caller.agentId);
  await announceChange(ctx, team, caller, callerName, change);
  return {
    success: true,
    task,
    ...(change.nowReady.length > 0 ? { nowReady: change.nowReady.map((ready) => ready.id) } : {}),
    ...(change.stuck.length > 0 ? { stuck: change.stuck } : {}),
    ...boardWarnings(warnings),
  };
}

import { isoNow } from "../clock.ts";
import { assertAgentId } from "../state/paths.ts";
import type { Task, TaskStatus, TeamConfig } from "../state/schemas.ts";
import type { TeamsContext } from "./context.ts";
import { loadTeam, requireMember } from "./identity.ts";
import { CallerError, type OpResult } from "./result.ts";

const ORDER: Record<TaskStatus, number> = { pending: 0, in_progress: 1, completed: 2 };

function assertMemberId(team: TeamConfig, agentId: string): void {
  assertAgentId(agentId);
  if (!team.members.some((member) => member.agentId === agentId)) {
    throw new CallerError(`Agent '${agentId}' is not a member of team '${team.name}'`);
  }
}

export interface CreateTaskInput {
  teamName: string;
  title: string;
  description?: string;
  assignee?: string;
}

export async function createTask(
  ctx: TeamsContext,
  input: CreateTaskInput,
  sessionId: string,
): Promise<OpResult<{ task: Task }>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertMemberId(team, input.assignee);
  const now = isoNow(ctx.clock);
  let created: Task | undefined;
  await ctx.store.updateTasks(team.name, (board) => {
    created = {
      id: `task-${board.nextId}`,
      title: input.title,
      description: input.description,
      status: "pending",
      assignee: input.assignee ?? null,
      createdBy: caller.agentId,
      createdAt: now,
      updatedAt: now,
    };
    return { ...board, nextId: board.nextId + 1, tasks: [...board.tasks, created] };
  });
  if (!created) throw new Error("task board update did not run");
  return { success: true, task: created };
}

export interface UpdateTaskInput {
  teamName: string;
  taskId: string;
  status: TaskStatus;
  assignee?: string;
}

export async function updateTask(
  ctx: TeamsContext,
  input: UpdateTaskInput,
  sessionId: string,
): Promise<OpResult<{ task: Task }>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertMemberId(team, input.assignee);
  let updated: Task | undefined;
  let refusal: string | undefined;
  await ctx.store.updateTasks(team.name, (board) => {
    const task = board.tasks.find((candidate) => candidate.id === input.taskId);
    if (!task) {
      refusal = `Task '${input.taskId}' not found in team '${team.name}'`;
      return undefined;
    }
    if (ORDER[input.status] < ORDER[task.status]) {
      refusal = `Task '${task.id}' is ${task.status}; a task's status only moves forward (pending -> in_progress -> completed)`;
      return undefined;
    }
    if (!caller.isLeader && task.assignee !== null && task.assignee !== caller.agentId) {
      refusal = `Task '${task.id}' is assigned to agent '${task.assignee}'; only that agent or the leader may update it`;
      return undefined;
    }
    // Starting an unowned task claims it for the caller.
    const assignee =
      input.assignee ??
      (input.status === "in_progress" && task.assignee === null ? caller.agentId : task.assignee);
    updated = { ...task, status: input.status, assignee, updatedAt: isoNow(ctx.clock) };
    return {
      ...board,
      tasks: board.tasks.map((candidate) => (candidate.id === task.id ? (updated as Task) : candidate)),
    };
  });
  if (refusal) return { success: false, error: refusal };
  if (!updated) throw new Error("task board update did not run");
  return { success: true, task: updated };
}

export interface ListTasksInput {
  teamName: string;
  status?: TaskStatus;
  assignee?: string;
}

export async function listTasks(
  ctx: TeamsContext,
  input: ListTasksInput,
  sessionId: string,
): Promise<OpResult<{ tasks: Task[]; warnings?: string[] }>> {
  const team = await loadTeam(ctx, input.teamName);
  await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertAgentId(input.assignee);
  const board = await ctx.store.readTasks(team.name);
  const all = board.kind === "ok" ? board.value.tasks : [];
  const tasks = all.filter(
    (task) =>
      (input.status === undefined || task.status === input.status) &&
      (input.assignee === undefined || task.assignee === input.assignee),
  );
  return board.kind === "corrupt"
    ? { success: true, tasks, warnings: [`${board.warning}; the task board starts empty again`] }
    : { success: true, tasks };
}

/**
 * Hand a dead agent's work back: its in_progress tasks return to pending with no owner. One board write for any
 * number of agents, so a sweep that loses many agents at once stays cheap.
 */
export async function reassignTasksOf(
  ctx: TeamsContext,
  teamName: string,
  agentIds: readonly string[],
  reason: string,
): Promise<Map<string, string[]>> {
  const byAgent = new Map<string, string[]>();
  if (agentIds.length === 0) return byAgent;
  const owners = new Set(agentIds);
  const now = isoNow(ctx.clock);
  await ctx.store.updateTasks(teamName, (board) => {
    let changed = false;
    const tasks = board.tasks.map((task) => {
      if (task.status !== "in_progress" || task.assignee === null || !owners.has(task.assignee)) return task;
      changed = true;
      byAgent.set(task.assignee, [...(byAgent.get(task.assignee) ?? []), task.id]);
      return {
        ...task,
        status: "pending" as const,
        assignee: null,
        updatedAt: now,
        reassignedReason: reason,
      };
    });
    return changed ? { ...board, tasks } : undefined;
  });
  return byAgent;
}

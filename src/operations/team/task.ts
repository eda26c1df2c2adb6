import { boundText, ECHO_MAX } from "../../bounded-text.ts";
import { isoNow } from "../../clock.ts";
import { assertAgentId } from "../../state/paths.ts";
import type { AgentState, Task, TaskBoard, TaskStatus, TeamConfig } from "../../state/schemas.ts";
import { agentLabel } from "../agents/agent-words.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { CallerError, type OpResult } from "../result.ts";
import { type Caller, loadTeam, requireMember } from "./identity.ts";

const ORDER: Record<TaskStatus, number> = { pending: 0, in_progress: 1, completed: 2 };

function assertMemberId(team: TeamConfig, agentId: string): void {
  assertAgentId(agentId);
  if (!team.members.some((member) => member.agentId === agentId)) {
    throw new CallerError(`Agent '${agentId}' is not a member of team '${team.name}'`);
  }
}

/** `task-<n>` on a team's first board; `task-<series>-<n>` on a board begun after one was lost. */
function taskIdPrefix(board: TaskBoard): string {
  return board.series ? `task-${board.series}-` : "task-";
}

/**
 * The number of the board's next task: its counter, moved past every id of its series already on the board, since a
 * hand edit or an older copy put back can leave the counter behind its tasks (specs/storage.md, "Task ids").
 */
function nextTaskNumber(board: TaskBoard): number {
  const prefix = taskIdPrefix(board);
  let next = board.nextId;
  for (const { id } of board.tasks) {
    const rest = id.startsWith(prefix) ? id.slice(prefix.length) : "";
    if (/^\d+$/.test(rest)) next = Math.max(next, Number(rest) + 1);
  }
  return next;
}

async function agentState(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<AgentState | undefined> {
  const read = await ctx.store.readAgent(teamName, agentId);
  return read.kind === "ok" ? read.value : undefined;
}

/**
 * Why `agentId` cannot own a task now, or undefined when it can: only a running agent (spawning, active, idle) takes
 * work, since nothing hands back the tasks of an agent that already ended. Read under the board's lock: an agent
 * declared dead after this read has its tasks handed back by a board write that waits for ours.
 */
async function ownerRefusal(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
): Promise<string | undefined> {
  if (agentId === team.leader) return undefined;
  const agent = await agentState(ctx, team.name, agentId);
  if (!agent) {
    return `Agent '${agentId}' of team '${team.name}' cannot be read, so it cannot take tasks. Assign a running agent (see list-agents).`;
  }
  if (isLive(agent.status)) return undefined;
  const who = agentLabel(agent);
  const why =
    agent.status === "terminated"
      ? `ended (${agent.outcome ?? "terminated"})`
      : agent.status === "inactive"
        ? `inactive (${agent.statusReason ?? "it stopped responding"})`
        : "shutting down";
  return `${who} is ${why} and cannot take tasks. Assign a running agent (see list-agents)${
    agent.status === "shutting_down" ? "" : ", or resume this one first (resume-agent)"
  }.`;
}

/**
 * Why the calling agent may not change the board, or undefined when it may. An agent declared inactive had its tasks
 * handed back and may be replaced: its work would collide with whoever took them over.
 */
async function callerRefusal(
  ctx: TeamsContext,
  team: TeamConfig,
  caller: Caller,
  claiming: boolean,
): Promise<string | undefined> {
  if (caller.isLeader) return undefined;
  const agent = await agentState(ctx, team.name, caller.agentId);
  if (agent?.status === "inactive") {
    return `You were declared inactive (${agent.statusReason ?? "no sign of life"}) and your tasks went back to pending. Stop working and ask the team leader to resume you (resume-agent ${agent.agentId}); do not change the task board meanwhile.`;
  }
  if (claiming && agent?.status === "shutting_down") {
    return "You are shutting down: take no new task. Save your work and call confirm-shutdown.";
  }
  return undefined;
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
): Promise<OpResult<{ task: Task; warnings?: string[] }>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertMemberId(team, input.assignee);
  const now = isoNow(ctx.clock);
  let created: Task | undefined;
  let refusal: string | undefined;
  const { warnings } = await ctx.store.updateTasks(team.name, async (board) => {
    refusal =
      (await callerRefusal(ctx, team, caller, false)) ??
      (input.assignee === undefined ? undefined : await ownerRefusal(ctx, team, input.assignee));
    if (refusal) return undefined;
    const number = nextTaskNumber(board);
    created = {
      id: `${taskIdPrefix(board)}${number}`,
      title: input.title,
      description: input.description,
      status: "pending",
      assignee: input.assignee ?? null,
      createdBy: caller.agentId,
      createdAt: now,
      updatedAt: now,
    };
    return { ...board, nextId: number + 1, tasks: [...board.tasks, created] };
  });
  if (refusal) return { success: false, error: refusal };
  if (!created) throw new Error("task board update did not run");
  return { success: true, task: created, ...boardWarnings(warnings) };
}

function boardWarnings(warnings: string[]): { warnings?: string[] } {
  return warnings.length > 0
    ? {
        warnings: warnings.map(
          (w) => `${w}; the task board starts empty again, and ids of the lost board are never reused`,
        ),
      }
    : {};
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
): Promise<OpResult<{ task: Task; warnings?: string[] }>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertMemberId(team, input.assignee);
  let updated: Task | undefined;
  let refusal: string | undefined;
  const { warnings } = await ctx.store.updateTasks(team.name, async (board) => {
    refusal = await callerRefusal(ctx, team, caller, input.status === "in_progress");
    if (refusal) return undefined;
    const matches = board.tasks.filter((candidate) => candidate.id === input.taskId);
    const task = matches[0];
    if (!task) {
      refusal = `Task '${boundText(input.taskId, ECHO_MAX)}' not found in team '${team.name}'`;
      return undefined;
    }
    if (matches.length > 1) {
      refusal = `Task id '${task.id}' is on the board of team '${team.name}' ${matches.length} times (the board was edited by hand or an older copy was put back), so which task you mean is unclear. Nothing was changed: ask the user to give each of them its own id in ${ctx.store.paths.tasks(team.name)}, then retry.`;
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
    // Whoever ends up owning unfinished work must be running to do it (or to have it handed back when it dies).
    if (input.status !== "completed" && assignee !== null) {
      refusal = await ownerRefusal(ctx, team, assignee);
      if (refusal) return undefined;
    }
    updated = { ...task, status: input.status, assignee, updatedAt: isoNow(ctx.clock) };
    return {
      ...board,
      tasks: board.tasks.map((candidate) => (candidate.id === task.id ? (updated as Task) : candidate)),
    };
  });
  if (refusal) return { success: false, error: refusal };
  if (!updated) throw new Error("task board update did not run");
  return { success: true, task: updated, ...boardWarnings(warnings) };
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
    ? { success: true, tasks, ...boardWarnings([board.warning]) }
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

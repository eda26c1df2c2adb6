import { boundText } from "../../bounded-text.ts";
import { isoNow } from "../../clock.ts";
import { assertAgentId } from "../../state/paths.ts";
import type { Task, TaskBoard, TaskStatus } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, type OpResult } from "../result.ts";
import { loadTeam, requireMember } from "./identity.ts";
import { checkBlockerList, checkGraph, TaskGraph } from "./task-graph.ts";
import {
  assertMemberId,
  boardWarnings,
  callerRefusal,
  nextTaskNumber,
  ownerRefusal,
  taskIdPrefix,
} from "./task-rules.ts";

/** How many tasks one create-task call may plan: a plan, not a bulk import. */
export const MAX_TASKS_PER_CALL = 50;

/** One task of a plan: `ref` names it for the `blockedBy` of the others in the same call. */
export interface TaskPlan {
  ref?: string;
  title: string;
  description?: string;
  assignee?: string;
  blockedBy?: string[];
}

export interface CreateTaskInput extends Partial<TaskPlan> {
  teamName: string;
  tasks?: TaskPlan[];
}

/** A task as the tools show it: with the tasks waiting for it and whether it can be claimed now. */
export type TaskView = Task & { blocks: string[]; ready: boolean };

export function taskView(graph: TaskGraph, task: Task): TaskView {
  return { ...task, blocks: graph.blocks(task.id), ready: graph.isReady(task) };
}

/** The call's plans, one for the single form; refuses a call that mixes both forms or gives neither. */
function plansOf(input: CreateTaskInput): TaskPlan[] {
  if (input.tasks !== undefined) {
    if (input.title !== undefined || input.ref !== undefined) {
      throw new CallerError("Give either title (one task) or tasks (a plan), not both. Nothing was created.");
    }
    if (input.tasks.length === 0 || input.tasks.length > MAX_TASKS_PER_CALL) {
      throw new CallerError(
        `tasks holds ${input.tasks.length} tasks; one call plans 1 to ${MAX_TASKS_PER_CALL}. Nothing was created.`,
      );
    }
    return input.tasks;
  }
  if (input.title === undefined) {
    throw new CallerError("Give a title (one task) or tasks (a plan of several). Nothing was created.");
  }
  const { title, description, assignee, blockedBy } = input;
  return [{ title, description, assignee, blockedBy }];
}

/** Refs of a plan, checked: unique, and never shaped like a task id, so a blockedBy entry means one thing. */
function refsOf(plans: readonly TaskPlan[]): Map<string, number> {
  const refs = new Map<string, number>();
  plans.forEach((plan, index) => {
    if (plan.ref === undefined) return;
    if (plan.ref.startsWith("task-")) {
      throw new CallerError(
        `ref '${plan.ref}' looks like a task id; name refs like "api" or "tests". Nothing was created.`,
      );
    }
    if (refs.has(plan.ref)) throw new CallerError(`ref '${plan.ref}' is used twice. Nothing was created.`);
    refs.set(plan.ref, index);
  });
  return refs;
}

export async function createTask(
  ctx: TeamsContext,
  input: CreateTaskInput,
  sessionId: string,
): Promise<OpResult<{ task: TaskView; tasks?: TaskView[]; warnings?: string[] }>> {
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, sessionId);
  const plans = plansOf(input);
  const refs = refsOf(plans);
  plans.forEach((plan, index) => {
    if (plan.assignee !== undefined) assertMemberId(team, plan.assignee);
    checkBlockerList(plan.ref ?? `tasks[${index}]`, plan.blockedBy ?? []);
  });
  const now = isoNow(ctx.clock);
  let created: Task[] = [];
  let graph: TaskGraph | undefined;
  let refusal: string | undefined;
  const { warnings } = await ctx.store.updateTasks(team.name, async (board) => {
    refusal = await callerRefusal(ctx, team, caller, false);
    for (const assignee of new Set(plans.map((plan) => plan.assignee))) {
      refusal ??= assignee === undefined ? undefined : await ownerRefusal(ctx, team, assignee);
    }
    if (refusal) return undefined;
    const first = nextTaskNumber(board);
    const ids = plans.map((_, index) => `${taskIdPrefix(board)}${first + index}`);
    created = plans.map((plan, index) => ({
      id: ids[index] as string,
      title: plan.title,
      description: plan.description,
      status: "pending" as const,
      assignee: plan.assignee ?? null,
      createdBy: caller.agentId,
      createdAt: now,
      updatedAt: now,
      blockedBy: checkBlockerList(ids[index] as string, plan.blockedBy ?? []).map((entry) => {
        const ref = refs.get(entry);
        return ref === undefined ? entry : (ids[ref] as string);
      }),
    }));
    const next: TaskBoard = { ...board, nextId: first + plans.length, tasks: [...board.tasks, ...created] };
    graph = new TaskGraph(next.tasks);
    checkGraph(graph, team.name, created);
    return next;
  });
  if (refusal) return { success: false, error: refusal };
  if (!graph || created.length === 0) throw new Error("task board update did not run");
  const views = created.map((task) => taskView(graph as TaskGraph, task));
  return {
    success: true,
    task: views[0] as TaskView,
    ...(input.tasks !== undefined ? { tasks: views } : {}),
    ...boardWarnings(warnings),
  };
}

export interface ListTasksInput {
  teamName: string;
  status?: TaskStatus;
  assignee?: string;
  ready?: boolean;
  taskId?: string;
  limit?: number;
  offset?: number;
}

/**
 * One listing's bounds (specs/list-tasks.md): a page of tasks and a cut in each description, so that a board of a
 * thousand tasks does not put a hundred thousand tokens into the caller's context.
 */
export const LIST_LIMIT_DEFAULT = 100;
export const LIST_LIMIT_MAX = 1_000;
export const LISTED_DESCRIPTION_MAX = 300;

/** What a listing shows of a task: its view, the description cut past LISTED_DESCRIPTION_MAX. */
function listedView(graph: TaskGraph, task: Task): TaskView {
  const view = taskView(graph, task);
  if (task.description === undefined || task.description.length <= LISTED_DESCRIPTION_MAX) return view;
  return {
    ...view,
    description: boundText(task.description, LISTED_DESCRIPTION_MAX, "list-tasks with taskId shows it whole"),
  };
}

/** A board's graph and the listed view of every task on it, in board order. */
interface BoardListing {
  graph: TaskGraph;
  views: readonly TaskView[];
}

/**
 * Listings by board, built once per board read: readTasks hands back the same tasks array while the file is unchanged
 * (and never changes it), so a repeated list-tasks of an unchanged board indexes nothing again. A changed board is a
 * new array, so nothing here outlives the board it was built from. The views are shared by the calls: never changed.
 */
const listings = new WeakMap<readonly Task[], BoardListing>();

function listingOf(tasks: readonly Task[]): BoardListing {
  let listing = listings.get(tasks);
  if (!listing) {
    const graph = new TaskGraph(tasks);
    listing = { graph, views: tasks.map((task) => listedView(graph, task)) };
    listings.set(tasks, listing);
  }
  return listing;
}

function checkPage(input: ListTasksInput): { limit: number; offset: number } {
  const limit = input.limit ?? LIST_LIMIT_DEFAULT;
  const offset = input.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) {
    throw new CallerError(`limit must be a whole number from 1 to ${LIST_LIMIT_MAX}`);
  }
  if (!Number.isInteger(offset) || offset < 0) throw new CallerError("offset must be a whole number from 0");
  return { limit, offset };
}

export async function listTasks(
  ctx: TeamsContext,
  input: ListTasksInput,
  sessionId: string,
): Promise<OpResult<{ tasks: TaskView[]; total: number; nextOffset?: number; warnings?: string[] }>> {
  const { limit, offset } = checkPage(input);
  const team = await loadTeam(ctx, input.teamName);
  await requireMember(ctx, team, sessionId);
  if (input.assignee !== undefined) assertAgentId(input.assignee);
  const board = await ctx.store.readTasks(team.name);
  const boardTasks = board.kind === "ok" ? board.value.tasks : [];
  const { graph, views } = listingOf(boardTasks);
  const { status, assignee, ready, taskId } = input;
  const matches = (view: TaskView) =>
    (status === undefined || view.status === status) &&
    (assignee === undefined || view.assignee === assignee) &&
    (ready === undefined || view.ready === ready) &&
    (taskId === undefined || view.id === taskId);
  // The task asked for by id is shown whole: the way to read a description a listing cut.
  const matching =
    taskId !== undefined
      ? boardTasks.flatMap((task, index) =>
          matches(views[index] as TaskView) ? [taskView(graph, task)] : [],
        )
      : views.filter(matches);
  const tasks = matching.slice(offset, offset + limit);
  const page = {
    tasks,
    total: matching.length,
    ...(offset + limit < matching.length ? { nextOffset: offset + limit } : {}),
  };
  return board.kind === "corrupt"
    ? { success: true, ...page, ...boardWarnings([board.warning]) }
    : { success: true, ...page };
}

/**
 * Hand a dead agent's work back: its in_progress tasks return to pending with no owner, keeping their place on the
 * board and in the graph (claim-task hands out the oldest first). Pending tasks reserved for it are freed too, or they
 * would wait for an agent that never claims them. One board write for any number of agents, so a sweep that loses many
 * agents at once stays cheap. The map holds, per agent, the in_progress tasks it gave back.
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
      if (task.assignee === null || !owners.has(task.assignee)) return task;
      if (task.status !== "in_progress" && task.status !== "pending") return task;
      changed = true;
      if (task.status === "in_progress") {
        byAgent.set(task.assignee, [...(byAgent.get(task.assignee) ?? []), task.id]);
      }
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

import type { Task } from "../../state/schemas.ts";
import { CallerError } from "../result.ts";

/** How many tasks one task may wait for: a plan needs a handful; thousands are a model looping, not a plan. */
export const MAX_BLOCKERS = 50;

/** Statuses after which a task never moves again; of them only `completed` lets the tasks it blocks go ahead. */
export const FINAL_STATUSES: ReadonlySet<Task["status"]> = new Set(["completed", "failed", "cancelled"]);

/**
 * The dependency graph of one board, indexed once per call so every question is answered in time linear in the
 * board: `blockedBy` edges point from a task to the tasks it waits for, `blocks` is their reverse.
 */
export class TaskGraph {
  readonly byId = new Map<string, Task>();
  private readonly blocksOf = new Map<string, string[]>();

  constructor(readonly tasks: readonly Task[]) {
    for (const task of tasks) {
      // A duplicated id (a hand edit) resolves to its first copy, as update-task refuses to pick between them.
      if (!this.byId.has(task.id)) this.byId.set(task.id, task);
    }
    for (const task of tasks) {
      for (const blocker of task.blockedBy) {
        const list = this.blocksOf.get(blocker);
        if (list) list.push(task.id);
        else this.blocksOf.set(blocker, [task.id]);
      }
    }
  }

  /** The tasks that wait for `id`, in board order. */
  blocks(id: string): string[] {
    return this.blocksOf.get(id) ?? [];
  }

  /** The blockers of `task` that are not completed; a blocker missing from the board (hand-edited away) still holds it. */
  openBlockers(task: Task): string[] {
    return task.blockedBy.filter((id) => this.byId.get(id)?.status !== "completed");
  }

  /** Pending with every blocker completed: the task can be claimed now. */
  isReady(task: Task): boolean {
    if (task.status !== "pending") return false;
    // A loop, not openBlockers: list-tasks asks this of every task of a board a thousand long.
    for (const id of task.blockedBy) if (this.byId.get(id)?.status !== "completed") return false;
    return true;
  }

  /** "task-2 (in_progress), task-3 (failed)": what a blocked task waits for, as an error or a listing says it. */
  describeBlockers(ids: readonly string[]): string {
    return ids.map((id) => `${id} (${this.byId.get(id)?.status ?? "not on the board"})`).join(", ");
  }

  /** Every open task that waits, directly or not, for `id`: what a failed or cancelled task leaves stuck. */
  downstream(id: string): string[] {
    const seen = new Set<string>();
    const stack = [...this.blocks(id)];
    while (stack.length > 0) {
      const next = stack.pop() as string;
      if (seen.has(next)) continue;
      seen.add(next);
      stack.push(...this.blocks(next));
    }
    return this.tasks
      .filter((task) => seen.has(task.id) && !FINAL_STATUSES.has(task.status))
      .map((task) => task.id);
  }

  /**
   * A cycle reachable from `starts`, as the path of ids from a task back to itself, or undefined. Iterative
   * depth-first search with an explicit stack, so a chain thousands deep never exhausts the call stack.
   */
  findCycle(starts: readonly string[]): string[] | undefined {
    const done = new Set<string>();
    for (const start of starts) {
      if (done.has(start)) continue;
      const path: string[] = [start];
      const onPath = new Set<string>([start]);
      const cursors: number[] = [0];
      while (path.length > 0) {
        const top = path[path.length - 1] as string;
        const blockers = this.byId.get(top)?.blockedBy ?? [];
        const at = cursors[cursors.length - 1] as number;
        if (at >= blockers.length) {
          done.add(top);
          onPath.delete(top);
          path.pop();
          cursors.pop();
          continue;
        }
        cursors[cursors.length - 1] = at + 1;
        const next = blockers[at] as string;
        if (onPath.has(next)) return [...path.slice(path.indexOf(next)), next];
        if (done.has(next) || !this.byId.has(next)) continue;
        path.push(next);
        onPath.add(next);
        cursors.push(0);
      }
    }
    return undefined;
  }
}

/** A cycle's path for an error, shortened in the middle when long: the model needs its ends, not a thousand ids. */
export function cycleText(path: readonly string[]): string {
  const shown =
    path.length <= 12
      ? path
      : [...path.slice(0, 8), `… ${path.length - 11} more …`, ...path.slice(path.length - 3)];
  return shown.join(" waits for ");
}

/** Refuses a blockedBy list past the bound; a blocker named twice counts once. */
export function checkBlockerList(taskLabel: string, blockedBy: readonly string[]): string[] {
  if (blockedBy.length > MAX_BLOCKERS) {
    throw new CallerError(
      `${taskLabel}: blockedBy lists ${blockedBy.length} tasks; a task may wait for at most ${MAX_BLOCKERS}. Split the work or chain it (a task waits for one that waits for the others). Nothing was changed.`,
    );
  }
  return [...new Set(blockedBy)];
}

/**
 * Refuses a board whose changed tasks name blockers that are not on it (never existed, or another team's ids) or
 * that close a cycle (a task blocking itself is the shortest one).
 */
export function checkGraph(graph: TaskGraph, teamName: string, changed: readonly Task[]): void {
  for (const task of changed) {
    const unknown = task.blockedBy.filter((id) => !graph.byId.has(id));
    if (unknown.length > 0) {
      throw new CallerError(
        `${task.id}: blockedBy names ${unknown.map((id) => `'${id}'`).join(", ")}, not on the board of team '${teamName}' (task ids belong to one team; list-tasks shows this team's). Nothing was changed.`,
      );
    }
  }
  const cycle = graph.findCycle(changed.map((task) => task.id));
  if (cycle) {
    throw new CallerError(
      `That would make a cycle, so none of these tasks could ever start: ${cycleText(cycle)}. Nothing was changed: drop one of these dependencies.`,
    );
  }
}

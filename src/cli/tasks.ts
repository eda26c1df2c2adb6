import type { TeamsContext } from "../operations/context.ts";
import { type TaskView, taskView } from "../operations/team/task.ts";
import { quoteTitle } from "../operations/team/task-events.ts";
import { TaskGraph } from "../operations/team/task-graph.ts";
import { shortId } from "./agent-ref.ts";
import { formatAge, type Painter, renderWarnings, type Style } from "./format.ts";

export interface BoardTask extends TaskView {
  /** The assignee's name, when its agent file reads. */
  assigneeName: string | null;
  /** Seconds since the task last changed (status, owner, dependencies). */
  ageS: number;
}

export interface TasksReport {
  generatedAt: string;
  teams: { team: string; tasks: BoardTask[] }[];
  warnings: string[];
}

/** Read straight from the state files: the board and the agents' names, no server. */
export async function collectTasks(ctx: TeamsContext, teamName: string | undefined): Promise<TasksReport> {
  const names = teamName ? [teamName] : await ctx.store.listTeamNames();
  const now = ctx.clock.now();
  const warnings: string[] = [];
  const teams: TasksReport["teams"] = [];
  for (const team of names) {
    if ((await ctx.store.readTeam(team)).kind === "missing") throw new Error(`Team '${team}' does not exist`);
    const board = await ctx.store.readTasks(team);
    if (board.kind === "corrupt") warnings.push(board.warning);
    const listed = await ctx.store.listAgentViews(team);
    const nameOf = new Map(listed.items.map(({ state }) => [state.agentId, state.name]));
    const graph = new TaskGraph(board.kind === "ok" ? board.value.tasks : []);
    const tasks = graph.tasks.map((task) => ({
      ...taskView(graph, task),
      assigneeName: task.assignee === null ? null : (nameOf.get(task.assignee) ?? null),
      ageS: Math.max(0, (now - Date.parse(task.updatedAt)) / 1000),
    }));
    teams.push({ team, tasks });
  }
  return { generatedAt: new Date(now).toISOString(), teams, warnings };
}

const TASK_STYLE: Record<string, Style> = {
  pending: "yellow",
  in_progress: "cyan",
  completed: "green",
  failed: "red",
  cancelled: "gray",
};

/** Deeper than this the tree stops indenting: a chain a thousand long stays readable. */
const MAX_INDENT = 16;

function taskLine(task: BoardTask, paint: Painter): string {
  const status = task.ready ? "ready" : task.status === "pending" ? "blocked" : task.status;
  const owner = task.assigneeName ?? (task.assignee ? shortId(task.assignee) : "-");
  const also = task.blockedBy.length > 1 ? paint(`  (waits for ${task.blockedBy.join(", ")})`, "gray") : "";
  const why = task.reason ? paint(`  ${quoteTitle(task.reason)}`, "gray") : "";
  return `${paint(task.id, "bold")} ${paint(status.padEnd(11), TASK_STYLE[task.ready ? "completed" : task.status])} ${owner.padEnd(12)} ${formatAge(task.ageS).padStart(6)}  ${quoteTitle(task.title)}${also}${why}`;
}

/**
 * The board as a forest of dependencies: roots are tasks that wait for nothing on the board, each task's children the
 * tasks it blocks. A task with several blockers is drawn under the first one and named "(see above)" under the others.
 * Walked with an explicit stack, so a deep chain never exhausts the call stack.
 */
export function renderTaskTree(tasks: readonly BoardTask[], paint: Painter): string[] {
  const byId = new Map(tasks.map((task) => [task.id, task]));
  const drawn = new Set<string>();
  const lines: string[] = [];
  const roots = tasks.filter((task) => !task.blockedBy.some((id) => byId.has(id)));
  const stack: { id: string; depth: number }[] = roots.map((task) => ({ id: task.id, depth: 0 })).reverse();
  while (stack.length > 0) {
    const { id, depth } = stack.pop() as { id: string; depth: number };
    const task = byId.get(id);
    if (!task) continue;
    const indent = depth === 0 ? "" : `${"  ".repeat(Math.min(depth, MAX_INDENT) - 1)}└ `;
    if (drawn.has(id)) {
      lines.push(`${indent}${paint(`${id} (see above)`, "gray")}`);
      continue;
    }
    drawn.add(id);
    lines.push(`${indent}${taskLine(task, paint)}`);
    for (const child of [...task.blocks].reverse()) stack.push({ id: child, depth: depth + 1 });
  }
  // Tasks on a cycle (a hand-edited board) have no root: list them rather than hide them.
  for (const task of tasks)
    if (!drawn.has(task.id)) lines.push(`${taskLine(task, paint)} ${paint("(on a cycle)", "red")}`);
  return lines;
}

export function renderTasks(report: TasksReport, paint: Painter): string {
  const parts = report.teams.map(({ team, tasks }) => {
    const counts = ["ready", "in_progress", "blocked", "completed", "failed", "cancelled"]
      .map((kind) => {
        const n = tasks.filter((task) =>
          kind === "ready"
            ? task.ready
            : kind === "blocked"
              ? task.status === "pending" && !task.ready
              : task.status === kind,
        ).length;
        return n > 0 ? `${n} ${kind}` : "";
      })
      .filter(Boolean);
    const head = paint(
      `team ${team}: ${tasks.length} task(s)${counts.length ? ` (${counts.join(", ")})` : ""}`,
      "bold",
    );
    return [head, ...(tasks.length > 0 ? renderTaskTree(tasks, paint) : ["(no tasks)"])].join("\n");
  });
  return [...parts, ...renderWarnings(report.warnings, paint)].join("\n\n") || "no teams";
}

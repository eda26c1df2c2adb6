import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import {
  createTask,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  LISTED_DESCRIPTION_MAX,
  listTasks,
  MAX_TASKS_PER_CALL,
} from "../operations/team/task.ts";
import { claimTask } from "../operations/team/task-claim.ts";
import { MAX_BLOCKERS } from "../operations/team/task-graph.ts";
import { REASON_MAX, updateTask } from "../operations/team/task-update.ts";
import claimTaskDescription from "./claim-task.txt";
import createTaskDescription from "./create-task.txt";
import { toolDescription } from "./description.ts";
import listTasksDescription from "./list-tasks.txt";
import { runTool } from "./result.ts";
import updateTaskDescription from "./update-task.txt";

const z = tool.schema;
const taskStatus = z.enum(["pending", "in_progress", "completed", "failed", "cancelled"]);
const bounds = { maxBlockers: MAX_BLOCKERS, maxTasks: MAX_TASKS_PER_CALL, reasonMax: REASON_MAX };
// Unbounded here on purpose: the operation refuses a list past MAX_BLOCKERS with an error that says what to do.
const blockedBy = z.array(z.string());
const title = z.string().min(1).max(500);
const description = z.string().max(20_000);

export function createTaskTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(createTaskDescription, ctx.options, bounds),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      title: title.optional().describe("Short title of the task (one task; omit when you give tasks)"),
      description: description.optional().describe("What has to be done"),
      assignee: z.string().optional().describe("Agent id of the member who should do it"),
      blockedBy: blockedBy.optional().describe("Ids of tasks that must be completed before this one starts"),
      tasks: z
        .array(
          z.object({
            ref: z
              .string()
              .min(1)
              .max(100)
              .optional()
              .describe("A name for this task, for blockedBy of the others"),
            title,
            description: description.optional(),
            assignee: z.string().optional(),
            blockedBy: blockedBy.optional().describe("Task ids, or refs of other tasks in this call"),
          }),
        )
        .optional()
        .describe("A plan of several tasks created together (instead of title)"),
    },
    execute: (args, context) =>
      runTool(
        "create-task",
        ctx.log,
        () => createTask(ctx, args, context.sessionID),
        (result) =>
          result.tasks
            ? `${result.tasks.length} tasks created: ${result.tasks.map((task) => task.id).join(", ")}`
            : `Task ${result.task.id} created: ${result.task.title}`,
      ),
  });
}

export function updateTaskTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(updateTaskDescription, ctx.options, bounds),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      taskId: z.string().min(1).describe("Task id, e.g. task-3"),
      status: taskStatus.optional().describe("New status"),
      reason: z.string().optional().describe("Why (required with failed or cancelled)"),
      assignee: z.string().optional().describe("Agent id of the new owner"),
      blockedBy: blockedBy.optional().describe("Replaces the ids of the tasks this pending task waits for"),
    },
    execute: (args, context) =>
      runTool(
        "update-task",
        ctx.log,
        () => updateTask(ctx, args, context.sessionID),
        (result) => `Task ${result.task.id} is ${result.task.status}`,
      ),
  });
}

export function listTasksTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(listTasksDescription, ctx.options, {
      limitDefault: LIST_LIMIT_DEFAULT,
      limitMax: LIST_LIMIT_MAX,
      descriptionMax: LISTED_DESCRIPTION_MAX,
    }),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      status: taskStatus.optional().describe("Only tasks with this status"),
      assignee: z.string().optional().describe("Only tasks owned by this agent id"),
      ready: z.boolean().optional().describe("true: only tasks that can be claimed now"),
      taskId: z.string().min(1).optional().describe("Only this task, its description whole"),
      limit: z
        .number()
        .int()
        .min(1)
        .max(LIST_LIMIT_MAX)
        .optional()
        .describe(`At most this many tasks (default ${LIST_LIMIT_DEFAULT})`),
      offset: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe("Skip this many matching tasks (nextOffset of the last page)"),
    },
    execute: (args, context) =>
      runTool(
        "list-tasks",
        ctx.log,
        () => listTasks(ctx, args, context.sessionID),
        (result) =>
          result.tasks.length === result.total
            ? `${result.total} task(s)`
            : `${result.tasks.length} of ${result.total} task(s)`,
      ),
  });
}

export function claimTaskTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(claimTaskDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
    },
    execute: (args, context) =>
      runTool(
        "claim-task",
        ctx.log,
        () => claimTask(ctx, args, context.sessionID),
        (result) => (result.task ? `Claimed ${result.task.id}: ${result.task.title}` : "No task ready"),
      ),
  });
}

import { tool } from "@opencode-ai/plugin";
import type { TeamsContext } from "../operations/context.ts";
import { createTask, listTasks, updateTask } from "../operations/team/task.ts";
import createTaskDescription from "./create-task.txt";
import { toolDescription } from "./description.ts";
import listTasksDescription from "./list-tasks.txt";
import { runTool } from "./result.ts";
import updateTaskDescription from "./update-task.txt";

const z = tool.schema;
const taskStatus = z.enum(["pending", "in_progress", "completed"]);

export function createTaskTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(createTaskDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      title: z.string().min(1).max(500).describe("Short title of the task"),
      description: z.string().max(20_000).optional().describe("What has to be done"),
      assignee: z.string().optional().describe("Agent id of the member who should do it"),
    },
    execute: (args, context) =>
      runTool(
        "create-task",
        ctx.log,
        () => createTask(ctx, args, context.sessionID),
        (result) => `Task ${result.task.id} created: ${result.task.title}`,
      ),
  });
}

export function updateTaskTool(ctx: TeamsContext) {
  return tool({
    description: toolDescription(updateTaskDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      taskId: z.string().min(1).describe("Task id, e.g. task-3"),
      status: taskStatus.describe("New status"),
      assignee: z.string().optional().describe("Agent id of the new owner"),
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
    description: toolDescription(listTasksDescription, ctx.options),
    args: {
      teamName: z.string().min(1).describe("Team name"),
      status: taskStatus.optional().describe("Only tasks with this status"),
      assignee: z.string().optional().describe("Only tasks owned by this agent id"),
    },
    execute: (args, context) =>
      runTool(
        "list-tasks",
        ctx.log,
        () => listTasks(ctx, args, context.sessionID),
        (result) => `${result.tasks.length} task(s)`,
      ),
  });
}

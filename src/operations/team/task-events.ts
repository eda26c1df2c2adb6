import { isoNow } from "../../clock.ts";
import type { Task, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { deliverInboxMessage } from "../messages/delivery.ts";
import { notifyLeader, SYSTEM_SENDER } from "../messages/notify.ts";
import { errorText } from "../result.ts";
import type { Caller } from "./identity.ts";
import type { TaskGraph } from "./task-graph.ts";

/** What one board write changed for the tasks after it: what became ready, and what a failure or cancel left stuck. */
export interface BoardChange {
  /** Tasks ready now that were not before the write, in board order. */
  nowReady: Task[];
  /** Per task that failed or was cancelled in the write: the open tasks that wait for it, directly or not. */
  stuck: { taskId: string; status: Task["status"]; reason?: string; blocked: string[] }[];
}

/** The change between the board before a write and after it, computed under the lock from the two graphs. */
export function boardChange(before: TaskGraph, after: TaskGraph): BoardChange {
  const nowReady = after.tasks.filter((task) => {
    if (!after.isReady(task)) return false;
    const old = before.byId.get(task.id);
    // A task created by this write is news to no one: its creator has it in the tool result.
    return old !== undefined && !before.isReady(old);
  });
  const stuck = after.tasks
    .filter((task) => {
      const old = before.byId.get(task.id);
      return (task.status === "failed" || task.status === "cancelled") && old?.status !== task.status;
    })
    .map((task) => ({
      taskId: task.id,
      status: task.status,
      ...(task.reason ? { reason: task.reason } : {}),
      blocked: after.downstream(task.id),
    }))
    .filter((entry) => entry.blocked.length > 0);
  return { nowReady, stuck };
}

/** Characters that move a terminal's cursor or reorder text: control codes (C0, C1) and format characters (bidirectional overrides, zero-width). */
const UNSAFE = /[\p{Cc}\p{Cf}]/gu;

/** A title as a notice, message or the CLI quotes it: one line, bounded, quoted, inert (it was written by a model). */
export function quoteTitle(title: string): string {
  const line = title.replace(/\s+/g, " ").replace(UNSAFE, "?").trim();
  return JSON.stringify(line.length > 80 ? `${line.slice(0, 79)}…` : line);
}

function readyLine(task: Task): string {
  const owner =
    task.assignee === null ? "unassigned: any free agent can claim-task it" : `for ${task.assignee}`;
  return `${task.id} ${quoteTitle(task.title)} (${owner})`;
}

function noticeText(who: string, change: BoardChange): string {
  const lines: string[] = [];
  if (change.nowReady.length > 0) {
    lines.push(`Tasks now ready after ${who}'s update: ${change.nowReady.map(readyLine).join("; ")}.`);
  }
  for (const entry of change.stuck) {
    lines.push(
      `${entry.taskId} ${entry.status}${entry.reason ? ` (${quoteTitle(entry.reason)})` : ""}: ${entry.blocked.join(", ")} stay blocked behind it. Re-point them (update-task blockedBy) or cancel them (update-task status cancelled).`,
    );
  }
  return lines.join("\n");
}

/**
 * Tell the team what a board write changed, after the lock is released: each running assignee of a task that became
 * ready gets one message naming its tasks; the leader gets a notice of what became ready and what is stuck, unless
 * the leader made the change itself (its tool result says it). Failures are logged: the board is already right, and
 * list-tasks and claim-task show the truth to anyone who asks.
 */
export async function announceChange(
  ctx: TeamsContext,
  team: TeamConfig,
  caller: Caller,
  callerName: string,
  change: BoardChange,
): Promise<void> {
  const byAssignee = new Map<string, Task[]>();
  for (const task of change.nowReady) {
    if (task.assignee === null || task.assignee === caller.agentId || task.assignee === team.leader) continue;
    byAssignee.set(task.assignee, [...(byAssignee.get(task.assignee) ?? []), task]);
  }
  for (const [assignee, tasks] of byAssignee) {
    await tellAssignee(ctx, team, assignee, tasks).catch((error: unknown) => {
      ctx.log("warn", "could not tell an agent its tasks are ready", {
        team: team.name,
        agent: assignee,
        error: errorText(error),
      });
    });
  }
  if (caller.isLeader || (change.nowReady.length === 0 && change.stuck.length === 0)) return;
  await notifyLeader(ctx, team, {
    type: "notice",
    text: noticeText(callerName, change),
    data: { nowReady: change.nowReady.map((task) => task.id), stuck: change.stuck },
  }).catch((error: unknown) => {
    ctx.log("warn", "could not tell the leader what the board change did", {
      team: team.name,
      error: errorText(error),
    });
  });
}

async function tellAssignee(
  ctx: TeamsContext,
  team: TeamConfig,
  assignee: string,
  tasks: readonly Task[],
): Promise<void> {
  const agent = await ctx.store.readAgent(team.name, assignee);
  if (agent.kind !== "ok" || !isLive(agent.value.status)) return;
  const names = tasks.map((task) => `${task.id} ${quoteTitle(task.title)}`).join(", ");
  const message = await ctx.store.appendInbox({
    teamName: team.name,
    to: assignee,
    from: SYSTEM_SENDER,
    fromName: SYSTEM_SENDER,
    fromRole: "task board",
    type: "message",
    text: `Ready for you now (everything they waited for is completed): ${names}. When you are free, take them with claim-task {"teamName": ${JSON.stringify(team.name)}}.`,
    createdAt: isoNow(ctx.clock),
  });
  // Not delivered now (spawning, or its server unreachable): it stays in the inbox and the sweep delivers it.
  await deliverInboxMessage(ctx, team, message);
}

import { assertAgentId } from "../../state/paths.ts";
import type { AgentState, TaskBoard, TeamConfig } from "../../state/schemas.ts";
import { JOURNAL_NAME } from "../../state/task-journal.ts";
import { agentLabel } from "../agents/agent-words.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { CallerError } from "../result.ts";
import type { Caller } from "./identity.ts";

// Who may hold and change the board's work, and how its ids are made: shared by every task operation.

export function assertMemberId(team: TeamConfig, agentId: string): void {
  assertAgentId(agentId);
  if (!team.members.some((member) => member.agentId === agentId)) {
    throw new CallerError(`Agent '${agentId}' is not a member of team '${team.name}'`);
  }
}

/** `task-<n>` on a team's first board; `task-<series>-<n>` on a board begun after one was lost. */
export function taskIdPrefix(board: TaskBoard): string {
  return board.series ? `task-${board.series}-` : "task-";
}

/**
 * The number of the board's next task: its counter, moved past every id of its series already on the board, since a
 * hand edit or an older copy put back can leave the counter behind its tasks (specs/storage.md, "Task ids").
 */
export function nextTaskNumber(board: TaskBoard): number {
  const prefix = taskIdPrefix(board);
  let next = board.nextId;
  for (const { id } of board.tasks) {
    const rest = id.startsWith(prefix) ? id.slice(prefix.length) : "";
    if (/^\d+$/.test(rest)) next = Math.max(next, Number(rest) + 1);
  }
  return next;
}

export async function agentState(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
): Promise<AgentState | undefined> {
  const read = await ctx.store.readAgent(teamName, agentId);
  return read.kind === "ok" ? read.value : undefined;
}

/**
 * An agent's record read once in a call, under the board's lock: the caller's, whose refusals and name a task call
 * needs (three reads of one file before). The leader's is never read: no rule of the board looks at it.
 */
export interface KnownAgent {
  agentId: string;
  agent: AgentState | undefined;
}

export async function readCaller(ctx: TeamsContext, team: TeamConfig, caller: Caller): Promise<KnownAgent> {
  if (caller.isLeader) return { agentId: caller.agentId, agent: undefined };
  // A blocking read: one small file on a hot path under the board's lock (a claim), where a round trip through the
  // thread pool costs more than the read.
  const read = await ctx.store.readAgent(team.name, caller.agentId, { blocking: true });
  return { agentId: caller.agentId, agent: read.kind === "ok" ? read.value : undefined };
}

/**
 * Why `agentId` cannot own a task now, or undefined when it can: only a running agent (spawning, active, idle) takes
 * work, since nothing hands back the tasks of an agent that already ended. Read under the board's lock: an agent
 * declared dead after this read has its tasks handed back by a board write that waits for ours. `known`: a record
 * already read in this call, used when it is `agentId`'s.
 */
export async function ownerRefusal(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  known?: KnownAgent,
): Promise<string | undefined> {
  if (agentId === team.leader) return undefined;
  const agent = known?.agentId === agentId ? known.agent : await agentState(ctx, team.name, agentId);
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
 * handed back and may be replaced: its work would collide with whoever took them over. `self`: the caller's record
 * when this call already read it (readCaller).
 */
export async function callerRefusal(
  ctx: TeamsContext,
  team: TeamConfig,
  caller: Caller,
  claiming: boolean,
  self?: KnownAgent,
): Promise<string | undefined> {
  if (caller.isLeader) return undefined;
  const agent = self ? self.agent : await agentState(ctx, team.name, caller.agentId);
  if (agent?.status === "inactive") {
    return `You were declared inactive (${agent.statusReason ?? "no sign of life"}) and your tasks went back to pending. Stop working and ask the team leader to resume you (resume-agent ${agent.agentId}); do not change the task board meanwhile.`;
  }
  if (claiming && agent?.status === "shutting_down") {
    return "You are shutting down: take no new task. Save your work and call confirm-shutdown.";
  }
  return undefined;
}

/**
 * The store's warnings about the board, with what a lost board means. Warnings about its journal (a damaged record,
 * a copy kept aside) say their own consequence: the board itself was kept.
 */
export function boardWarnings(warnings: string[]): { warnings?: string[] } {
  return warnings.length > 0
    ? {
        warnings: warnings.map((w) =>
          w.startsWith(JOURNAL_NAME)
            ? w
            : `${w}; the task board starts empty again, and ids of the lost board are never reused`,
        ),
      }
    : {};
}

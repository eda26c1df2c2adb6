import { v4 as uuidv4 } from "uuid";
import type { TeamsContext } from "../src/operations/context.ts";
import { createTeam } from "../src/operations/team.ts";
import {
  type AgentState,
  AgentStateSchema,
  type HeartbeatRecord,
  ServerInfoSchema,
  type Task,
} from "../src/state/schemas.ts";
import { createJson, writeJson } from "../src/state/store.ts";

/** The leader's session id in every seeded team: `leader-<team>`. */
export function leaderSession(teamName: string): string {
  return `leader-${teamName}`;
}

export interface SeededTeam {
  teamName: string;
  leaderId: string;
  agents: AgentState[];
}

/**
 * A team of `count` workers written straight to disk, the way spawn leaves them (agent file plus heartbeat slot), but
 * without spawn's fsync'd replaces: seeding 1000 agents must not dominate the run.
 */
export async function seedTeam(
  ctx: TeamsContext,
  teamName: string,
  count: number,
  agent: (index: number, now: string) => Partial<AgentState> = () => ({}),
  options: { tasks?: boolean } = {},
): Promise<SeededTeam> {
  const created = await createTeam(ctx, { teamName }, leaderSession(teamName));
  if (!created.success) throw new Error(created.error);
  const now = new Date(ctx.clock.now()).toISOString();
  const agents: AgentState[] = Array.from({ length: count }, (_, index) => ({
    version: 1,
    agentId: uuidv4(),
    name: `worker-${index + 1}`,
    teamName,
    role: "worker",
    model: "mock/mock-model",
    status: "active",
    color: "blue",
    heartbeatTs: now,
    heartbeatSource: "spawn",
    sessionId: `ses_${teamName}_${index + 1}`,
    cwd: ctx.projectRoot,
    consecutiveMisses: 0,
    sessionRotationCount: 0,
    createdAt: now,
    updatedAt: now,
    prompt: "Review the module assigned to you and report what you find.",
    headless: true,
    tags: [],
    ...agent(index, now),
  }));
  const { store } = ctx;
  for (let start = 0; start < agents.length; start += 64) {
    await Promise.all(
      agents.slice(start, start + 64).map(async (state) => {
        await createJson(store.paths.agentState(teamName, state.agentId), AgentStateSchema, state);
        const slot: HeartbeatRecord = {
          version: 1,
          heartbeatTs: state.heartbeatTs,
          source: "tool",
          updates: 1,
        };
        await store.writeHeartbeat(teamName, state.agentId, slot);
      }),
    );
  }
  await store.updateTeam(teamName, (team) =>
    team
      ? {
          ...team,
          members: [
            ...team.members,
            ...agents.map((a) => ({ agentId: a.agentId, name: a.name, role: a.role, joinedAt: now })),
          ],
        }
      : undefined,
  );
  if (options.tasks) {
    await store.updateTasks(teamName, (board) => ({
      ...board,
      nextId: board.nextId + agents.length,
      tasks: agents.map(
        (a, index): Task => ({
          id: `task-${board.nextId + index}`,
          title: `Review part ${index + 1}`,
          status: "in_progress",
          assignee: a.agentId,
          createdBy: created.leaderAgentId,
          createdAt: now,
          updatedAt: now,
        }),
      ),
    }));
  }
  return { teamName, leaderId: created.leaderAgentId, agents };
}

/** A ServerInfo as the server manager records it: the inactive path recounts its activeSessions. */
export async function recordServerInfo(ctx: TeamsContext, port: number, pid = process.pid): Promise<void> {
  await writeJson(ctx.store.paths.serverInfo(ctx.projectRoot), ServerInfoSchema, {
    version: 1,
    projectPath: ctx.projectRoot,
    pid,
    port,
    hostname: "127.0.0.1",
    startedAt: new Date(ctx.clock.now()).toISOString(),
    activeSessions: 0,
    logPath: ctx.store.paths.serverLog(ctx.projectRoot),
  });
}

/** Milliseconds `fn` takes, by the high-resolution clock. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/** Progress for the human watching; the table is the output. */
export function note(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

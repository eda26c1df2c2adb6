import type { TeamsContext } from "../src/operations/context.ts";
import { createTeam } from "../src/operations/team/team.ts";
import { type AgentState, AgentStateSchema, type HeartbeatRecord, type Task } from "../src/state/schemas.ts";
import { createJson } from "../src/state/store.ts";
import { agentFixture } from "../tests/helpers/agents.ts";

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
  const agents: AgentState[] = Array.from({ length: count }, (_, index) =>
    agentFixture(ctx, teamName, {
      name: `worker-${index + 1}`,
      heartbeatSource: "spawn",
      sessionId: `ses_${teamName}_${index + 1}`,
      prompt: "Review the module assigned to you and report what you find.",
      ...agent(index, now),
    }),
  );
  const { store } = ctx;
  for (let start = 0; start < agents.length; start += 64) {
    await Promise.all(
      agents.slice(start, start + 64).map(async (state) => {
        await createJson(store.paths.agentState(teamName, state.agentId), AgentStateSchema, state, {
          durable: false,
        });
        const slot: HeartbeatRecord = {
          version: 1,
          heartbeatTs: state.heartbeatTs,
          source: "tool",
          updates: 1,
        };
        store.writeHeartbeat(teamName, state.agentId, slot);
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
          blockedBy: [],
          createdBy: created.leaderAgentId,
          createdAt: now,
          updatedAt: now,
        }),
      ),
    }));
  }
  return { teamName, leaderId: created.leaderAgentId, agents };
}

/** Milliseconds `fn` takes, by the high-resolution clock. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/** The last progress note and when it was written, for the runner's "still running" line. */
export const lastNote = { text: "", at: 0 };

/** Progress for the human watching; the table is the output. */
export function note(text: string): void {
  Object.assign(lastNote, { text, at: performance.now() });
  process.stderr.write(`  ${text}\n`);
}

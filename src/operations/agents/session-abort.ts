import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import { claimHolds } from "./resume-claim.ts";

/** The record a call just ended, and the session it ran in. */
export interface EndedSession {
  teamName: string;
  agentId: string;
  sessionId: string;
}

export interface AbortHow {
  /** The successor's id when resume-agent itself ends the record it claimed: its old turn is still aborted. */
  resumingAs?: string;
  /** Whether the run was still going: only then is a project server that is not running worth a warning. */
  wasRunning: boolean;
}

/** Who else holds the session now, if anyone: the leader, a resume launching a successor on it, a live record. */
async function otherHolder(
  ctx: TeamsContext,
  ended: EndedSession,
  resumingAs: string | undefined,
): Promise<string | undefined> {
  const team = await ctx.store.readTeam(ended.teamName);
  if (team.kind === "ok" && team.value.leaderSessionId === ended.sessionId) return "the team leader";
  const read = await ctx.store.readAgent(ended.teamName, ended.agentId);
  if (read.kind === "ok") {
    const { resumedBy } = read.value;
    if (resumedBy && resumedBy !== resumingAs && claimHolds(ctx.edges.processes, read.value, ctx.clock.now()))
      return `agent ${resumedBy}, which resume-agent is launching on it`;
  }
  const { items } = await ctx.store.listAgentViews(ended.teamName);
  const live = items.find(
    ({ state }) =>
      state.agentId !== ended.agentId && state.sessionId === ended.sessionId && state.status !== "terminated",
  );
  return live ? `agent '${live.state.name}' (${live.state.agentId})` : undefined;
}

/**
 * Abort the running turn of the session of a record this call just ended, unless the session is not that record's
 * alone any more (otherHolder): resume-agent hands the session of an ended record to a new one, whose work must not be
 * cut off. Decided and sent under the ended agent's lock, which resume-agent's claim takes too: a claim either comes
 * first (and is seen here) or waits until the abort has landed, so an abort never follows the successor's first
 * prompt. See specs/kill-agent.md.
 */
export function abortEndedSession(ctx: TeamsContext, ended: EndedSession, how: AbortHow): Promise<string[]> {
  return ctx.store.withAgentLock(ended.teamName, ended.agentId, async () => {
    const holder = await otherHolder(ctx, ended, how.resumingAs);
    if (holder) return [`Session ${ended.sessionId} now belongs to ${holder}; it was not aborted`];
    const server = await ctx.edges.projectServer();
    if (!server) {
      return how.wasRunning
        ? ["The project's OpenCode server is not running; there was no session to abort"]
        : [];
    }
    try {
      await server.abortSession(ended.sessionId);
      return [];
    } catch (error) {
      return [`Could not abort session ${ended.sessionId}: ${errorText(error)}`];
    }
  });
}

import type { TeamsContext } from "../operations/context.ts";
import { isRunning } from "../operations/liveness/heartbeat.ts";
import type { AgentState, TeamConfig } from "../state/schemas.ts";
import { CliFailure } from "./command.ts";

/** How many characters of an agent id the status table shows; any unique prefix of 4 or more is accepted. */
export const SHORT_ID_LENGTH = 8;
const MIN_PREFIX = 4;

export function shortId(agentId: string): string {
  return agentId.slice(0, SHORT_ID_LENGTH);
}

/** The team `teamName`, or a failure that lists the teams there are. */
export async function teamOrFail(ctx: TeamsContext, teamName: string): Promise<TeamConfig> {
  const read = await ctx.store.readTeam(teamName);
  if (read.kind === "ok") return read.value;
  if (read.kind === "corrupt") throw new CliFailure(`Team '${teamName}' cannot be read: ${read.warning}`);
  const teams = await ctx.store.listTeamNames();
  throw new CliFailure(
    `Team '${teamName}' does not exist. ${teams.length > 0 ? `Teams here: ${teams.join(", ")}.` : "There are no teams in this project yet."}`,
    teams.length > 0 ? "opencode-teams status" : undefined,
  );
}

/**
 * The agent a person means by `who`: its id, a unique prefix of it (as `status` shows), or its name. A name is
 * reused when an agent is resumed: the running record is meant, else the newest.
 */
export async function resolveAgent(ctx: TeamsContext, team: TeamConfig, who: string): Promise<AgentState> {
  const { items } = await ctx.store.listAgentViews(team.name);
  const states = items.map((view) => view.state);
  const lower = who.toLowerCase();
  const byId = states.filter((state) => state.agentId === lower);
  const byPrefix =
    lower.length >= MIN_PREFIX && /^[0-9a-f-]+$/.test(lower)
      ? states.filter((state) => state.agentId.startsWith(lower))
      : [];
  const byName = states.filter((state) => state.name === who);
  const candidates = byId.length > 0 ? byId : byName.length > 0 ? byName : byPrefix;
  const chosen = pick(candidates);
  if (chosen) return chosen;
  if (candidates.length > 1) {
    throw new CliFailure(
      `'${who}' matches ${candidates.length} agents of team '${team.name}': ${candidates.map((s) => `${s.name} (${shortId(s.agentId)})`).join(", ")}. Name one by its id.`,
      `opencode-teams status ${team.name} --all`,
    );
  }
  const names = [...new Set(states.map((state) => state.name))].sort();
  throw new CliFailure(
    `No agent '${who}' in team '${team.name}'. Its agents: ${names.join(", ") || "none"}.`,
    `opencode-teams status ${team.name} --all`,
  );
}

/** One record: the only one, else the running one, else the newest when all have ended. */
function pick(candidates: AgentState[]): AgentState | undefined {
  if (candidates.length <= 1) return candidates[0];
  const running = candidates.filter((state) => isRunning(state.status));
  if (running.length === 1) return running[0];
  if (running.length > 1) return undefined;
  const newest = [...candidates].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  // Two ended records of one name are one agent resumed: the newest run is the one a person means.
  const [first] = newest;
  return first && newest.every((state) => state.name === first.name) ? first : undefined;
}

import type { AgentRole, AgentState, TeamConfig } from "../../state/schemas.ts";
import { warnCaller } from "../call-warnings.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError } from "../result.ts";

/** Who is calling, as established from the caller's OpenCode session, never from an id argument. */
export interface Caller {
  agentId: string;
  role: AgentRole;
  isLeader: boolean;
}

export async function loadTeam(ctx: TeamsContext, teamName: string): Promise<TeamConfig> {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind === "ok") return team.value;
  const lost = team.kind === "corrupt" ? team.warning : "config.json is missing";
  const rebuilt = await rebuildTeam(ctx, teamName, lost);
  if (rebuilt) return rebuilt;
  if (team.kind === "corrupt") {
    throw new CallerError(
      `Team '${teamName}' cannot be read (${team.warning}) and cannot be rebuilt: no readable leader record is left in its agents directory. Remove ${ctx.store.paths.teamDir(teamName)} by hand to start over, or use another team name.`,
    );
  }
  throw new CallerError(`Team '${teamName}' does not exist`);
}

/**
 * A team whose config was lost, rebuilt from its agent files: the leader record (role leader) holds the leader's id
 * and session, the other files the members. Never a new leader: the team stays with the session that founded it.
 * Undefined when there is no single leader record to rebuild from.
 */
async function rebuildTeam(
  ctx: TeamsContext,
  teamName: string,
  lost: string,
): Promise<TeamConfig | undefined> {
  const { items } = await ctx.store.listAgentViews(teamName);
  const leaders = items.filter((view) => view.state.role === "leader");
  const leader = leaders[0]?.state;
  if (leaders.length !== 1 || !leader || leader.sessionId === "") return undefined;
  const config: TeamConfig = {
    version: 1,
    name: teamName,
    ...(leader.prompt ? { description: leader.prompt } : {}),
    createdAt: leader.createdAt,
    leader: leader.agentId,
    leaderSessionId: leader.sessionId,
    ...(leader.model !== "default" ? { defaultModel: leader.model } : {}),
    keepPanes: false,
    members: items.map(({ state }) => ({
      agentId: state.agentId,
      name: state.name,
      role: state.role,
      joinedAt: state.createdAt,
    })),
  };
  // Exclusive: of two processes rebuilding at once, one writes and the other reads what it wrote.
  if ((await ctx.store.createTeam(config)) === "exists") {
    const written = await ctx.store.readTeam(teamName);
    if (written.kind !== "ok") return undefined;
    return written.value;
  }
  const warning = `Team '${teamName}': ${lost}; its config was rebuilt from the agent files (leader ${leader.agentId}, ${config.members.length} members; keepPanes reset to false)`;
  ctx.log("warn", warning);
  warnCaller(warning);
  return config;
}

/** How long a session created under an agent's title is awaited in the index (see SessionIndex.expect). */
const EXPECTED_MS = 10_000;
/** Sessions awaited at most at once; the set starts over when full. */
const EXPECTED_LIMIT = 1_000;

/** Pick the live record when a session was handed from one agent record to another (resume keeps the session). */
function preferLive(a: AgentState, b: AgentState): AgentState {
  const aLive = a.status !== "terminated";
  const bLive = b.status !== "terminated";
  if (aLive !== bLive) return aLive ? a : b;
  return a.createdAt >= b.createdAt ? a : b;
}

export async function findTeamAgentBySession(
  ctx: TeamsContext,
  teamName: string,
  sessionId: string,
): Promise<AgentState | undefined> {
  const { items } = await ctx.store.listAgentViews(teamName);
  let found: AgentState | undefined;
  for (const { state } of items) {
    if (state.sessionId !== sessionId) continue;
    found = found ? preferLive(found, state) : state;
  }
  return found;
}

/** The caller's membership in `team`, or undefined when its session belongs to no agent of the team. */
export async function resolveCaller(
  ctx: TeamsContext,
  team: TeamConfig,
  sessionId: string,
): Promise<Caller | undefined> {
  if (team.leaderSessionId === sessionId) return { agentId: team.leader, role: "leader", isLeader: true };
  const agent = await findTeamAgentBySession(ctx, team.name, sessionId);
  if (!agent || agent.status === "terminated") return undefined;
  return { agentId: agent.agentId, role: agent.role, isLeader: agent.role === "leader" };
}

export async function requireMember(ctx: TeamsContext, team: TeamConfig, sessionId: string): Promise<Caller> {
  const caller = await resolveCaller(ctx, team, sessionId);
  if (!caller) {
    throw new CallerError(
      `This session is not a member of team '${team.name}'. Only the team's leader and its agents may do this.`,
    );
  }
  return caller;
}

export async function requireLeader(
  ctx: TeamsContext,
  team: TeamConfig,
  sessionId: string,
  message: string,
): Promise<Caller> {
  const caller = await resolveCaller(ctx, team, sessionId);
  if (!caller?.isLeader) throw new CallerError(message);
  return caller;
}

/** One record a session belongs to. */
export interface SessionOwner {
  teamName: string;
  agentId: string;
  role: AgentRole;
}

/**
 * Project-wide `sessionID -> agents` lookup for the event monitor, rebuilt from the agent files when it misses. A
 * session can be a live record in several teams (a worker that created its own team leads it with the same session):
 * every team keeps its own record of it, the live one when resume handed the session on.
 */
export class SessionIndex {
  /** Each session's owners, one per team, as the monitor asks for them at every event (one array, made at a rebuild). */
  private bySession = new Map<string, readonly SessionOwner[]>();
  private builtAt = Number.NEGATIVE_INFINITY;
  /** Sessions created under an agent's title and not in the index yet, each until when it is awaited (see `expect`). */
  private readonly expected = new Map<string, number>();

  constructor(
    private readonly ctx: TeamsContext,
    private readonly minRebuildMs = 1_000,
  ) {}

  invalidate(): void {
    this.builtAt = Number.NEGATIVE_INFINITY;
  }

  /**
   * A session was created under an agent's title: the spawn writes that agent's file as the session starts, and the
   * agent's first events must not wait out the rebuild interval (a quick first turn would end unseen, its agent shown
   * at work). Until the index holds it, or for EXPECTED_MS, a miss of it rebuilds at once. The title is only where to
   * look: the agent files decide whose session it is.
   */
  expect(sessionId: string): void {
    if (this.bySession.has(sessionId)) return;
    if (this.expected.size >= EXPECTED_LIMIT) this.expected.clear();
    this.expected.set(sessionId, this.ctx.clock.now() + EXPECTED_MS);
  }

  private awaited(sessionId: string): boolean {
    const until = this.expected.get(sessionId);
    if (until === undefined) return false;
    if (this.ctx.clock.now() <= until) return true;
    this.expected.delete(sessionId);
    return false;
  }

  async rebuild(): Promise<void> {
    const records = new Map<string, Map<string, AgentState>>();
    for (const teamName of await this.ctx.store.listTeamNames()) {
      const { items } = await this.ctx.store.listAgentViews(teamName);
      for (const { state } of items) {
        let byTeam = records.get(state.sessionId);
        if (!byTeam) {
          byTeam = new Map();
          records.set(state.sessionId, byTeam);
        }
        const existing = byTeam.get(teamName);
        byTeam.set(teamName, existing ? preferLive(existing, state) : state);
      }
    }
    const next = new Map<string, readonly SessionOwner[]>();
    for (const [sessionId, byTeam] of records) {
      const owners = [...byTeam.values()].map(({ teamName, agentId, role }) => ({ teamName, agentId, role }));
      next.set(sessionId, Object.freeze(owners));
    }
    this.bySession = next;
    this.builtAt = this.ctx.clock.now();
    for (const sessionId of this.expected.keys()) if (next.has(sessionId)) this.expected.delete(sessionId);
  }

  /** The records of a session as last built, or undefined when the index has none (see `lookup`). */
  known(sessionId: string): readonly SessionOwner[] | undefined {
    return this.bySession.get(sessionId);
  }

  /** The records of a session, one per team; a miss rebuilds (at most once per `minRebuildMs`) since another process may have spawned it. */
  async lookup(sessionId: string): Promise<readonly SessionOwner[]> {
    return this.bySession.get(sessionId) ?? this.relookup(sessionId);
  }

  /**
   * Look again after a rebuild (at most once per `minRebuildMs`, or now with `force`: the caller knows the cached entry
   * names a record that ended and was resumed).
   */
  async relookup(sessionId: string, force = false): Promise<readonly SessionOwner[]> {
    if (force || this.ctx.clock.now() - this.builtAt >= this.minRebuildMs || this.awaited(sessionId))
      await this.rebuild();
    return this.bySession.get(sessionId) ?? [];
  }
}

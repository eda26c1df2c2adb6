import { isoNow } from "../../clock.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { outcomeStatus } from "../history/history.ts";
import { agentEnded, agentSpawned } from "../history/run-history.ts";
import { CallerError } from "../result.ts";
import { type CapacityCheck, capacityCheck, memberCapacity, UNCOUNTED } from "../usage/limits.ts";
import type { AgentPane } from "./agent-pane.ts";
import type { Launching, LaunchSpec } from "./launch-spec.ts";

// What a launch writes to the team's state and history: the membership, the agent's first record, its activation
// once the pane is open, and its run.

export function initialState(ctx: TeamsContext, spec: LaunchSpec, up: Launching): AgentState {
  const now = isoNow(ctx.clock);
  return {
    version: 1,
    agentId: up.agentId,
    name: up.name,
    teamName: spec.team.name,
    role: spec.role,
    model: spec.model.model,
    ...(spec.model.providerId ? { providerId: spec.model.providerId } : {}),
    status: "spawning",
    color: up.color,
    heartbeatTs: now,
    heartbeatSource: "spawn",
    sessionId: up.sessionId,
    cwd: up.cwd,
    ...(up.worktree ? { worktree: up.worktree } : {}),
    consecutiveMisses: 0,
    sessionRotationCount: 0,
    createdAt: now,
    updatedAt: now,
    prompt: spec.taskPrompt,
    headless: spec.headless,
    ...(spec.timeoutMinutes !== undefined ? { timeoutMinutes: spec.timeoutMinutes } : {}),
    ...(spec.plan !== undefined ? { plan: spec.plan } : {}),
    ...(spec.resumes ? { resumes: spec.resumes } : {}),
    ...(spec.budget ? { budget: spec.budget } : {}),
    ...(spec.usageBase ? { usageBase: spec.usageBase } : {}),
    tags: [],
  };
}

/** The run in the history; closed at once for an agent that ended while it was being spawned. */
export async function recordRun(ctx: TeamsContext, registered: AgentState): Promise<string[]> {
  const warnings = await agentSpawned(ctx, registered);
  if (registered.status === "terminated") {
    // It ended before its run was in the history, so that end found nothing to close: record it now.
    warnings.push(
      ...(await agentEnded(ctx, registered, outcomeStatus(registered.outcome) ?? "completed", {
        reason: registered.statusReason ?? "ended while it was being spawned",
      })),
    );
  }
  return warnings;
}

/**
 * Reserve the new member's name under the team's lock, unless the team already runs its `maxAgents` (refused with a
 * CallerError). The agent files are read for the count only when the team has as many members as its limit.
 */
export async function reserveMember(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  role: "worker" | "reviewer",
  requestedName: string | undefined,
): Promise<string> {
  const reserved = await reserveIf(ctx, team, agentId, role, requestedName, memberCapacity(ctx));
  if (reserved !== UNCOUNTED) return reserved;
  return reserveIf(ctx, team, agentId, role, requestedName, await capacityCheck(ctx, team.name));
}

/** The reservation if `capacity` allows it; UNCOUNTED (nothing written) when it cannot tell. */
async function reserveIf<Verdict extends ReturnType<CapacityCheck>>(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  role: "worker" | "reviewer",
  requestedName: string | undefined,
  capacity: (current: TeamConfig) => Verdict,
): Promise<string | Extract<Verdict, typeof UNCOUNTED>> {
  let name: string | undefined;
  let verdict: Verdict | undefined;
  const joinedAt = isoNow(ctx.clock);
  // Blocking and not flushed: on the spawn's way to its prompt, the team's lock is held through no turn of the event
  // loop and nobody waits for the disk; the launch flushes the config once the agent's first turn began, before it
  // returns.
  await ctx.store.updateTeam(
    team.name,
    (current) => {
      if (!current) return undefined;
      // Under the team's lock, so two spawns at once cannot both take the last place (maxAgents).
      verdict = capacity(current);
      if (verdict !== undefined) return undefined;
      const taken = new Set(current.members.map((m) => m.name));
      name = requestedName;
      for (let n = 1; name === undefined; n++) if (!taken.has(`${role}-${n}`)) name = `${role}-${n}`;
      return { ...current, members: [...current.members, { agentId, name, role, joinedAt }] };
    },
    { durable: false, blocking: true },
  );
  if (verdict === UNCOUNTED) return verdict as Extract<Verdict, typeof UNCOUNTED>;
  if (typeof verdict === "string") throw new CallerError(verdict);
  if (name === undefined) throw new CallerError(`Team '${team.name}' does not exist`);
  return name;
}

export function removeMember(ctx: TeamsContext, teamName: string, agentId: string) {
  return ctx.store.updateTeam(teamName, (current) =>
    current?.members.some((m) => m.agentId === agentId)
      ? { ...current, members: current.members.filter((m) => m.agentId !== agentId) }
      : undefined,
  );
}

/**
 * Record the pane, and (when the prompt landed) spawning -> active with a fresh heartbeat, in one write under the
 * agent's lock. An agent that moved on meanwhile (its first heartbeat, or it completed) keeps its status. The agent's
 * event stream writes under the same lock in two processes while the new pane boots, so the section uses blocking
 * calls and holds the lock through no turn of the event loop; the launch flushes the file to disk once the lock is
 * given back, before the spawn returns (see specs/storage.md).
 */
export async function recordLaunch(
  ctx: TeamsContext,
  teamName: string,
  agentId: string,
  launch: { activate: boolean; pane: AgentPane | undefined },
): Promise<AgentState> {
  const now = isoNow(ctx.clock);
  const paneFields = launch.pane
    ? { paneId: launch.pane.paneId, tmux: launch.pane.placement, attachPid: launch.pane.attachPid }
    : {};
  return ctx.store.withAgentLock(teamName, agentId, async () => {
    const read = await ctx.store.readAgent(teamName, agentId, { blocking: true });
    if (read.kind !== "ok")
      throw new Error(`the agent file of ${agentId} could not be read back: ${read.kind}`);
    const activate = launch.activate && read.value.status === "spawning";
    const next: AgentState = {
      ...read.value,
      ...paneFields,
      ...(activate ? { status: "active" as const, heartbeatTs: now, heartbeatSource: "spawn" as const } : {}),
      updatedAt: now,
    };
    await ctx.store.writeAgent(next, { durable: false, blocking: true });
    if (activate) {
      ctx.store.writeHeartbeat(teamName, agentId, {
        version: 1,
        heartbeatTs: now,
        source: "spawn",
        updates: 0,
      });
    }
    return next;
  });
}

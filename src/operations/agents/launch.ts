import { v4 as uuidv4 } from "uuid";
import { isoNow } from "../../clock.ts";
import type { ProjectServer } from "../../edges/server-manager.ts";
import type { AgentState, AgentWorktree, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { outcomeStatus } from "../history/history.ts";
import { agentEnded, agentSpawned } from "../history/run-history.ts";
import { CallerError, errorText, fail, type OpResult } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { agentSessionTitle } from "../team/identity-prompt.ts";
import { placeAgent, type WorktreeRequest } from "../worktrees/worktrees.ts";
import { type AgentPane, agentPaneRef, closeAgentPane, openAgentPane, paneOwner } from "./agent-pane.ts";
import { allocateColor, releaseColor } from "./color-pool.ts";
import type { ResolvedModel } from "./model.ts";
import { checkPaneStartLater } from "./pane-start-check.ts";
import { type DeliveryResult, deliverPrompt, type PromptDelivery } from "./prompt-delivery.ts";
import { Rollback, StepFailure } from "./rollback.ts";
import type { StepClock } from "./step-clock.ts";

/** What spawn-agent and resume-agent answer. */
export interface SpawnAgentOutput {
  agentId: string;
  sessionId: string;
  paneId?: string;
  name: string;
  color: string;
  port: number;
  status: "active" | "spawning";
  promptDelivery: PromptDelivery;
  worktree?: AgentWorktree;
  warnings?: string[];
}

/** What spawn-agent and resume-agent bring up: everything after validation and the server. */
export interface LaunchSpec {
  team: TeamConfig;
  server: ProjectServer;
  role: "worker" | "reviewer";
  /** Validated requested name; a free `<role>-<n>` when absent. */
  name?: string;
  model: ResolvedModel;
  cwd: string;
  headless: boolean;
  timeoutMinutes?: number;
  plan?: string;
  /** Its worktree, made (spawn) or entered again (resume); `cwd` then lies inside it. */
  worktree?: WorktreeRequest;
  /** The agent's task as AgentState.prompt keeps it (listings, history, a later resume). */
  taskPrompt: string;
  /** What is sent to the session now; a function when it names the new agent's id. */
  message: string | ((agentId: string) => string);
  /** Continue this existing session (resume) instead of creating one; it is never deleted on rollback. */
  reuseSessionId?: string;
  /** The agent this one continues (resume). */
  resumes?: string;
  /** The new agent's id when the caller chose it first (resume claims the old agent for it); else a new UUID. */
  agentId?: string;
}

/** What a launch has brought up so far: enough to open its pane, deliver its prompt and record it. */
interface Launching {
  agentId: string;
  name: string;
  sessionId: string;
  cwd: string;
  worktree?: AgentWorktree;
  color: string;
  warnings: string[];
}

/**
 * Bring an agent up on a running project server: membership, session, color, pane, state, prompt, active, history.
 * Any failure is rolled back so no ghost agent (session, pane, color, member, file) remains.
 */
export async function launchAgent(
  ctx: TeamsContext,
  spec: LaunchSpec,
  steps: StepClock,
): Promise<OpResult<SpawnAgentOutput>> {
  const rollback = new Rollback(ctx);
  let paneOpening: ReturnType<typeof paneOpener> | undefined;
  let recount: Promise<void> | undefined;
  try {
    const up = await bringUp(ctx, spec, steps, rollback);
    // A spawning agent already counts as running: the server's session count is taken while the prompt is being
    // delivered instead of after the pane opens, when that pane's `opencode attach` boot competes for the CPU.
    recount = recountSessions(ctx);
    // The pane opens once the server has accepted the prompt, while the spawn waits for it to land: the pane's tmux
    // calls and its `opencode attach` boot overlap that wait instead of following it.
    paneOpening = paneOpener(ctx, spec, up, rollback);
    steps.progress("prompt", `Delivering the prompt to ${up.name}`);
    const delivered = await deliverFirstPrompt(ctx, spec, up, paneOpening.open);
    if (!spec.headless) steps.progress("pane", `Opening a tmux pane for ${up.name}`);
    const pane = spec.headless ? undefined : await paneOpening.open();
    steps.mark("activate");
    const registered = await activate(ctx, spec, up, delivered, pane);
    // The history's durable write and the agent file's flush to disk need not wait for each other.
    steps.mark("history");
    const [history] = await Promise.all([
      recordRun(ctx, registered),
      ctx.store.flushAgent(spec.team.name, up.agentId),
      recount,
    ]);
    up.warnings.push(...history);
    steps.mark("done");
    // Whether the pane's command started is known up to `settleMs` after it opened: checked once the call has
    // returned, a pane that died at once ends the agent and the leader's notice says why. An agent that already
    // ended had its pane closed on purpose.
    if (pane && registered.status !== "terminated") {
      const { name, sessionId } = up;
      checkPaneStartLater(ctx, { teamName: spec.team.name, agentId: up.agentId, name, sessionId, pane });
    }
    return launched(ctx, spec, { up, registered, pane, delivered, steps });
  } catch (error) {
    await paneOpening?.settled();
    const problems = await rollback.run();
    // The count taken early included the agent the rollback has just removed.
    if (recount) await recount.then(() => recountSessions(ctx));
    const text = error instanceof StepFailure || error instanceof CallerError ? error.message : null;
    if (text === null) ctx.log("error", "launching an agent failed", { error: errorText(error) });
    return fail(
      text ?? `${spec.resumes ? "resume-agent" : "spawn-agent"} failed: ${errorText(error)}`,
      problems.map((p) => `Rollback: ${p}`),
    );
  }
}

/** Membership, worktree, session, color and the agent's file, each undone by `rollback` if a later step fails. */
async function bringUp(
  ctx: TeamsContext,
  spec: LaunchSpec,
  steps: StepClock,
  rollback: Rollback,
): Promise<Launching> {
  const { team } = spec;
  const agentId = spec.agentId ?? uuidv4();
  const name = await reserveMember(ctx, team, agentId, spec.role, spec.name);
  rollback.push("the team membership", () => removeMember(ctx, team.name, agentId));

  if (spec.worktree) steps.progress("worktree", `Preparing the worktree of ${name}`);
  const place = await placeAgent(ctx, spec.worktree, spec.cwd, team.name, name);
  if (place.undo) rollback.push("the worktree", place.undo);

  // The color needs only the agent's id: its locked, durable write overlaps the session's creation. Undone after the
  // session's own undo, once the allocation settled, whichever of the two failed.
  const coloring = allocateColor(ctx, team.name, agentId);
  // Handled from the start: it may fail while the session is still being created, and an unhandled rejection stops
  // the host process. The failure itself is raised by the await below.
  coloring.catch(() => {});
  rollback.push("the color", async () => {
    await coloring.catch(() => {});
    await releaseColor(ctx, agentId);
  });
  const sessionId = await sessionFor(ctx, spec, { agentId, name, cwd: place.cwd }, steps, rollback);
  const color = await coloring;
  const up: Launching = {
    agentId,
    name,
    sessionId,
    cwd: place.cwd,
    ...(place.worktree ? { worktree: place.worktree } : {}),
    color: color.color,
    warnings: color.warning ? [color.warning] : [],
  };
  await ctx.store.createAgent(initialState(ctx, spec, up));
  rollback.push("the agent file", () => ctx.store.removeAgentFiles(team.name, agentId));
  return up;
}

/** The session to continue (resume), or a new one titled with the agent's identity. */
async function sessionFor(
  ctx: TeamsContext,
  spec: LaunchSpec,
  who: { agentId: string; name: string; cwd: string },
  steps: StepClock,
  rollback: Rollback,
): Promise<string> {
  if (spec.reuseSessionId) return spec.reuseSessionId;
  steps.progress("session", `Creating the session for ${who.name}`);
  let sessionId: string;
  try {
    ({ id: sessionId } = await spec.server.api.createSession({
      title: agentSessionTitle(spec.team.name, who.name, who.agentId),
      directory: who.cwd,
    }));
  } catch (error) {
    ctx.edges.serverControl?.forgetHealthy();
    throw new StepFailure(`Failed to create SDK session: ${errorText(error)}`);
  }
  rollback.push("the session", () => spec.server.api.deleteSession(sessionId));
  return sessionId;
}

function initialState(ctx: TeamsContext, spec: LaunchSpec, up: Launching): AgentState {
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
    tags: [],
  };
}

/** Opens the agent's pane on first call (and registers its undo); later calls return the same pane. */
function paneOpener(
  ctx: TeamsContext,
  spec: LaunchSpec,
  up: Launching,
  rollback: Rollback,
): { open: () => Promise<AgentPane>; settled: () => Promise<void> } {
  // One opening however many callers ask (the delivery's early start, its pane fallback, the launch itself).
  let opening: Promise<AgentPane> | undefined;
  const open = async (): Promise<AgentPane> => {
    let opened: AgentPane;
    try {
      opened = await openAgentPane(ctx, {
        teamName: spec.team.name,
        agentId: up.agentId,
        name: up.name,
        role: spec.role,
        color: up.color,
        sessionId: up.sessionId,
        cwd: up.cwd,
        serverUrl: spec.server.url,
        credentials: spec.server.credentials,
      });
    } catch (error) {
      throw new StepFailure(`Failed to create tmux pane: ${errorText(error)}`);
    }
    rollback.push("the pane", () => closeAgentPane(ctx, paneOwner(up.sessionId, opened)));
    return opened;
  };
  return {
    open: () => {
      opening ??= open();
      return opening;
    },
    // A rollback must wait for an opening under way: the pane's undo is pushed only once it is open.
    settled: async () => {
      await opening?.catch(() => undefined);
    },
  };
}

function deliverFirstPrompt(
  ctx: TeamsContext,
  spec: LaunchSpec,
  up: Launching,
  openPane: () => Promise<AgentPane>,
): Promise<DeliveryResult> {
  const text = typeof spec.message === "function" ? spec.message(up.agentId) : spec.message;
  return deliverPrompt(ctx, spec.server.api, up.sessionId, text, {
    // A new session has no messages; a continued one is counted first.
    ...(spec.reuseSessionId ? {} : { messagesBefore: 0 }),
    ...(spec.model.ref ? { model: spec.model.ref } : {}),
    ...(spec.headless
      ? {}
      : {
          // Started now, awaited by the launch: a failure to open is its error (caught here only so that it is
          // not reported unhandled while the delivery still runs).
          onAccepted: () => {
            openPane().catch(() => {});
          },
          pane: async () => {
            const opened = await openPane();
            return { ...agentPaneRef(paneOwner(up.sessionId, opened)), openedAt: opened.openedAt };
          },
        }),
  });
}

/** Record the pane and (when the prompt landed) make the agent active; close the pane of one that already ended. */
async function activate(
  ctx: TeamsContext,
  spec: LaunchSpec,
  up: Launching,
  delivered: DeliveryResult,
  pane: AgentPane | undefined,
): Promise<AgentState> {
  const promptLanded = delivered.delivery !== "failed";
  if (!promptLanded) {
    up.warnings.push(
      `The initial prompt could not be delivered (${delivered.problems.join("; ")}). The agent stays 'spawning'; send it the prompt again as a message, or kill it.`,
    );
  }
  const registered = await recordLaunch(ctx, spec.team.name, up.agentId, { activate: promptLanded, pane });
  if (registered.status === "terminated" && pane && !spec.team.keepPanes) {
    // It finished (complete-agent) before its pane was recorded, so nothing closed the pane: close it here.
    up.warnings.push(...(await closeAgentPane(ctx, paneOwner(up.sessionId, pane), { interrupt: false })));
  }
  return registered;
}

/** The server's count of running agent sessions, taken again; a failure is only logged (the next change recounts). */
async function recountSessions(ctx: TeamsContext): Promise<void> {
  await recountActiveSessions(ctx).catch((error: unknown) => {
    ctx.log("warn", "could not update activeSessions", { error: errorText(error) });
  });
}

/** The run in the history; closed at once for an agent that ended while it was being spawned. */
async function recordRun(ctx: TeamsContext, registered: AgentState): Promise<string[]> {
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

function launched(
  ctx: TeamsContext,
  spec: LaunchSpec,
  done: {
    up: Launching;
    registered: AgentState;
    pane: AgentPane | undefined;
    delivered: DeliveryResult;
    steps: StepClock;
  },
): OpResult<SpawnAgentOutput> {
  const { up, pane, delivered } = done;
  ctx.log("info", `agent ${up.name} ${spec.resumes ? "resumed" : "spawned"} into ${spec.team.name}`, {
    agentId: up.agentId,
    sessionId: up.sessionId,
    paneId: pane?.paneId,
    ...(spec.resumes ? { resumes: spec.resumes } : {}),
    timingsMs: done.steps.timings,
    delivery: delivered.delivery,
    ...(delivered.problems.length > 0 ? { deliveryProblems: delivered.problems } : {}),
  });
  return {
    success: true,
    agentId: up.agentId,
    sessionId: up.sessionId,
    ...(pane ? { paneId: pane.paneId } : {}),
    name: up.name,
    color: up.color,
    port: spec.server.info.port,
    status: done.registered.status === "spawning" ? "spawning" : "active",
    promptDelivery: delivered.delivery,
    ...(up.worktree ? { worktree: up.worktree } : {}),
    ...(up.warnings.length > 0 ? { warnings: up.warnings } : {}),
  };
}

async function reserveMember(
  ctx: TeamsContext,
  team: TeamConfig,
  agentId: string,
  role: "worker" | "reviewer",
  requestedName: string | undefined,
): Promise<string> {
  let name: string | undefined;
  const joinedAt = isoNow(ctx.clock);
  await ctx.store.updateTeam(team.name, (current) => {
    if (!current) return undefined;
    const taken = new Set(current.members.map((m) => m.name));
    name = requestedName;
    for (let n = 1; name === undefined; n++) if (!taken.has(`${role}-${n}`)) name = `${role}-${n}`;
    return { ...current, members: [...current.members, { agentId, name, role, joinedAt }] };
  });
  if (name === undefined) throw new CallerError(`Team '${team.name}' does not exist`);
  return name;
}

function removeMember(ctx: TeamsContext, teamName: string, agentId: string) {
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
async function recordLaunch(
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

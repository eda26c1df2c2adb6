import { v4 as uuidv4 } from "uuid";
import type { ProjectServer } from "../../edges/server-manager.ts";
import type { AgentState } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, errorText, fail, type OpResult } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { agentSessionTitle } from "../team/identity-prompt.ts";
import { placeAgent } from "../worktrees/worktrees.ts";
import { type AgentPane, agentPaneRef, closeAgentPane, paneOwner } from "./agent-pane.ts";
import { allocateColor, releaseColor } from "./color-pool.ts";
import { type FirstTurn, watchFirstTurn } from "./first-turn.ts";
import { paneOpener } from "./launch-pane.ts";
import { initialState, recordLaunch, recordRun, removeMember, reserveMember } from "./launch-records.ts";
import type { Launching, LaunchSpec, SpawnAgentOutput } from "./launch-spec.ts";
import { checkPaneStartLater } from "./pane-start-check.ts";
import { type DeliveryResult, deliverPrompt } from "./prompt-delivery.ts";
import { Rollback, StepFailure } from "./rollback.ts";
import type { StepClock } from "./step-clock.ts";

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
    // The pane opens once the agent's first turn has begun (first-turn.ts): its tmux calls and its `opencode attach`
    // boot overlap the rest of the launch instead of following it, and leave that turn the machine.
    paneOpening = paneOpener(ctx, spec, up, rollback);
    steps.progress("prompt", `Delivering the prompt to ${up.name}`);
    const firstTurn = watchFirstTurn(ctx, up.sessionId);
    const delivered = await deliverFirstPrompt(ctx, spec, up, paneOpening.open, firstTurn, steps);
    steps.mark("firstTurn");
    if (delivered.delivery === "failed") firstTurn.cancel();
    else await firstTurn.begun();
    // Started once the agent's turn is under way, so that none of it delays it: the server's session count (a spawning
    // agent already counts as running), taken before the pane opens, when that pane's `opencode attach` boot competes
    // for the CPU; and the flush to disk of the member's and the color's writes, made without one before the prompt
    // (awaited below: the spawn returns once they are durable).
    recount = recountSessions(ctx);
    const flushing = Promise.all([ctx.store.flushTeam(spec.team.name), ctx.store.colors.flush()]);
    // Awaited below; handled now, as it may fail while the pane opens (an unhandled rejection stops the host).
    flushing.catch(() => {});
    if (!spec.headless) steps.progress("pane", `Opening a tmux pane for ${up.name}`);
    const pane = spec.headless ? undefined : await paneOpening.open();
    steps.mark("activate");
    const registered = await activate(ctx, spec, up, delivered, pane);
    // The history's durable write and the agent file's flush to disk need not wait for each other.
    steps.mark("history");
    const [history] = await Promise.all([
      recordRun(ctx, registered),
      ctx.store.flushAgent(spec.team.name, up.agentId),
      flushing,
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

/**
 * Membership, worktree, color, session and the agent's file, each undone by `rollback` if a later step fails. The
 * project server may still be looked up (or booting) meanwhile: it is waited for right before the session.
 */
async function bringUp(
  ctx: TeamsContext,
  spec: LaunchSpec,
  steps: StepClock,
  rollback: Rollback,
): Promise<Launching> {
  const { team } = spec;
  const agentId = spec.agentId ?? uuidv4();
  steps.mark("member");
  const name = await reserveMember(ctx, team, agentId, spec.role, spec.name);
  rollback.push("the team membership", () => removeMember(ctx, team.name, agentId));

  // The color needs only the agent's id: its locked write overlaps the worktree, the server's lookup and the
  // session's creation. Undone after the session's own undo, once the allocation settled, whichever failed.
  const coloring = allocateColor(ctx, team.name, agentId);
  // Handled from the start: it may fail while the session is still being created, and an unhandled rejection stops
  // the host process. The failure itself is raised by the await below.
  coloring.catch(() => {});
  rollback.push("the color", async () => {
    await coloring.catch(() => {});
    await releaseColor(ctx, agentId);
  });

  if (spec.worktree) steps.progress("worktree", `Preparing the worktree of ${name}`);
  const place = await placeAgent(ctx, spec.worktree, spec.cwd, team.name, name);
  if (place.undo) rollback.push("the worktree", place.undo);

  steps.mark("server");
  const server = await spec.server;
  if ("success" in server) throw new StepFailure(server.error);
  const sessionId = await sessionFor(ctx, spec, server, { agentId, name, cwd: place.cwd }, steps, rollback);
  steps.mark("color");
  const color = await coloring;
  steps.mark("agentFile");
  const up: Launching = {
    server,
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
  server: ProjectServer,
  who: { agentId: string; name: string; cwd: string },
  steps: StepClock,
  rollback: Rollback,
): Promise<string> {
  if (spec.reuseSessionId) return spec.reuseSessionId;
  steps.progress("session", `Creating the session for ${who.name}`);
  let sessionId: string;
  try {
    ({ id: sessionId } = await server.api.createSession({
      title: agentSessionTitle(spec.team.name, who.name, who.agentId),
      directory: who.cwd,
    }));
  } catch (error) {
    ctx.edges.serverControl?.forgetHealthy();
    throw new StepFailure(`Failed to create SDK session: ${errorText(error)}`);
  }
  rollback.push("the session", () => server.api.deleteSession(sessionId));
  return sessionId;
}

function deliverFirstPrompt(
  ctx: TeamsContext,
  spec: LaunchSpec,
  up: Launching,
  openPane: () => Promise<AgentPane>,
  firstTurn: FirstTurn,
  steps: StepClock,
): Promise<DeliveryResult> {
  const text = typeof spec.message === "function" ? spec.message(up.agentId) : spec.message;
  return deliverPrompt(ctx, up.server.api, up.sessionId, text, {
    // A new session has no messages; a continued one is counted first.
    ...(spec.reuseSessionId ? {} : { messagesBefore: 0 }),
    ...(spec.model.ref ? { model: spec.model.ref } : {}),
    // When the call's first prompt went out, since the call started (in the log's timings).
    onSending: () => steps.at("promptSentAt"),
    ...(spec.headless
      ? {}
      : {
          // Started once the turn began, awaited by the launch: a failure to open is its error (caught here only so
          // that it is not reported unhandled while the delivery still runs).
          onAccepted: () => {
            firstTurn
              .begun()
              .then(openPane)
              .catch(() => {});
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
    port: up.server.info.port,
    status: done.registered.status === "spawning" ? "spawning" : "active",
    promptDelivery: delivered.delivery,
    ...(up.worktree ? { worktree: up.worktree } : {}),
    ...(up.warnings.length > 0 ? { warnings: up.warnings } : {}),
  };
}

import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { type Clock, isoNow } from "../../clock.ts";
import type { FilesApi } from "../../edges/files-api.ts";
import type { ModelRef, OpencodeApi } from "../../edges/opencode-api.ts";
import { type ProjectServer, ServerStartError } from "../../edges/server-manager.ts";
import type { PaneRef } from "../../edges/tmux-api.ts";
import { assertTeamName } from "../../state/paths.ts";
import type { AgentState, AgentWorktree, TeamConfig } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { outcomeStatus } from "../history/history.ts";
import { agentEnded, agentSpawned } from "../history/run-history.ts";
import { CallerError, type Failure, fail, type OpResult } from "../result.ts";
import { recountActiveSessions } from "../server/server-sessions.ts";
import { loadTeam, requireLeader } from "../team/identity.ts";
import { agentSessionTitle } from "../team/identity-prompt.ts";
import { placeAgent, planWorktree, type WorktreeRequest } from "../worktrees/worktrees.ts";
import {
  type AgentPane,
  agentPaneRef,
  closeAgentPane,
  confirmPaneStarted,
  openAgentPane,
  paneOwner,
  paneTimingOf,
} from "./agent-pane.ts";
import { allocateColor, releaseColor } from "./color-pool.ts";

export interface SpawnAgentInput {
  teamName: string;
  prompt: string;
  name?: string;
  model?: string;
  providerId?: string;
  role?: "worker" | "reviewer";
  cwd?: string;
  /** No pane: the agent runs on the server only. */
  headless?: boolean;
  /** How long the agent may run before it counts as timed out (see specs/spawn-agent.md). */
  timeoutMinutes?: number;
  /** Short name of the plan or epic the agent works under; kept in its state, the history and listings. */
  plan?: string;
  /** Its own git worktree: true for branch `teams/<team>/<name>`, a string for that branch (specs/worktrees.md). */
  worktree?: boolean | string;
}

export type PromptDelivery = "sdk" | "pane" | "failed";

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

/** Progress shown while the tool runs (OpenCode's ToolContext.metadata). */
export type SpawnProgress = (step: string) => void;

const NAME_MAX = 64;
const PLAN_MAX = 100;

export interface ResolvedModel {
  /** What AgentState.model records: "provider/model", or "default" when the server's default applies. */
  model: string;
  providerId?: string;
  ref?: ModelRef;
}

/**
 * `model` "provider/model"; or `providerId` with `model` taken verbatim as the model id (ids such as OpenRouter's
 * contain slashes); or the team's defaultModel; or nothing, and the server's default model applies.
 */
export function resolveModel(
  input: { model?: string; providerId?: string },
  team: TeamConfig,
): ResolvedModel {
  const model = input.model?.trim() || undefined;
  const providerId = input.providerId?.trim() || undefined;
  if (providerId && model) {
    const modelID = model.startsWith(`${providerId}/`) ? model.slice(providerId.length + 1) : model;
    return { model: `${providerId}/${modelID}`, providerId, ref: { providerID: providerId, modelID } };
  }
  if (providerId && !model) {
    throw new CallerError(
      `providerId '${providerId}' needs a model: pass model as well (e.g. "claude-sonnet-4-5")`,
    );
  }
  const ref = model ?? team.defaultModel;
  if (!ref) return { model: "default" };
  const slash = ref.indexOf("/");
  if (slash <= 0 || slash === ref.length - 1) {
    throw new CallerError(
      `Invalid model '${ref}': use "provider/model" (for example "anthropic/claude-sonnet-4-5") or pass providerId`,
    );
  }
  const providerID = ref.slice(0, slash);
  const modelID = ref.slice(slash + 1);
  return { model: `${providerID}/${modelID}`, providerId: providerID, ref: { providerID, modelID } };
}

/** The model an agent was spawned with, as AgentState keeps it ("provider/model" with providerId, or "default"). */
export function recordedModel(agent: Pick<AgentState, "model" | "providerId">): ResolvedModel {
  const providerID = agent.providerId ?? agent.model.slice(0, Math.max(0, agent.model.indexOf("/")));
  if (!providerID || !agent.model.startsWith(`${providerID}/`)) return { model: agent.model };
  const modelID = agent.model.slice(providerID.length + 1);
  return { model: agent.model, providerId: providerID, ref: { providerID, modelID } };
}

/** A short human label (an agent's name, a plan's): trimmed, 1-`max` printable characters. */
function validateLabel(what: string, value: string, max: number): string {
  const trimmed = value.trim();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
  if (trimmed === "" || trimmed.length > max || /[\u0000-\u001f\u007f]/.test(trimmed)) {
    throw new CallerError(
      `Invalid ${what} ${JSON.stringify(value.slice(0, 80))}: use 1-${max} printable characters`,
    );
  }
  return trimmed;
}

const ALLOW_HINT = "set the plugin option allowCwdOutsideProject to true to allow it";

/**
 * The agent's working directory: the project root or a directory inside it, judged on real paths so no symlink leads
 * out, and not inside a git repository nested in the project (OpenCode takes that for another project: its own
 * config, plugins and sessions). Returned under the project root as given, with no symlink below it.
 */
export async function resolveCwd(ctx: TeamsContext, cwd: string | undefined): Promise<string> {
  if (cwd === undefined || cwd.trim() === "") return ctx.projectRoot;
  const resolved = path.resolve(ctx.projectRoot, cwd);
  if ((await ctx.edges.files.kind(resolved)) !== "directory")
    throw new CallerError(`Working directory '${resolved}' does not exist`);
  if (ctx.options.allowCwdOutsideProject) return resolved;
  const { files } = ctx.edges;
  const [real, root] = await Promise.all([files.realpath(resolved), files.realpath(ctx.projectRoot)]);
  const inside = path.relative(root, real);
  if (inside === ".." || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside)) {
    throw new CallerError(
      `Working directory '${resolved}'${real === resolved ? "" : ` (really '${real}')`} is outside the project root '${root}': agents work inside the project. Pass a directory inside it, or ${ALLOW_HINT}.`,
    );
  }
  const nested = await nestedRepository(files, root, inside);
  if (nested) {
    throw new CallerError(
      `Working directory '${resolved}' is inside the git repository '${nested}', nested in the project: OpenCode treats it as a separate project (its own config, plugins and sessions), not as part of this team's. Pass a directory of this project outside it, or ${ALLOW_HINT}.`,
    );
  }
  return path.join(ctx.projectRoot, inside);
}

/** The outermost directory between `root` (excluded) and `root/inside` (included) that holds a `.git`. */
async function nestedRepository(files: FilesApi, root: string, inside: string): Promise<string | undefined> {
  let dir = root;
  for (const part of inside.split(path.sep).filter((p) => p !== "")) {
    dir = path.join(dir, part);
    if (await files.kind(path.join(dir, ".git"), { follow: false })) return dir;
  }
  return undefined;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A step that failed, carrying the error text specs/spawn-agent.md names for the response. */
class StepFailure extends Error {}

/** Undo what a failed spawn had done, newest first, so no ghost agent (session, pane, color, member, file) remains. */
class Rollback {
  private readonly steps: { what: string; undo: () => Promise<unknown> }[] = [];
  constructor(private readonly ctx: TeamsContext) {}
  push(what: string, undo: () => Promise<unknown>): void {
    this.steps.push({ what, undo });
  }
  async run(): Promise<string[]> {
    const problems: string[] = [];
    for (const step of this.steps.reverse()) {
      try {
        const result = await step.undo();
        if (Array.isArray(result)) problems.push(...result.map(String));
      } catch (error) {
        problems.push(`could not undo ${step.what}: ${message(error)}`);
      }
    }
    if (problems.length > 0) this.ctx.log("warn", "spawn rollback left something behind", { problems });
    return problems;
  }
}

/** Poll the session's message count until it grows past `before` or `windowMs` passes. */
async function landed(
  clock: Clock,
  api: OpencodeApi,
  sessionId: string,
  before: number,
  windowMs: number,
): Promise<boolean> {
  const deadline = clock.now() + windowMs;
  const interval = Math.max(10, Math.min(100, windowMs / 10));
  for (;;) {
    const count = await api.messageCount(sessionId).catch(() => undefined);
    if (count !== undefined && count > before) return true;
    if (clock.now() >= deadline) return false;
    await clock.sleep(interval);
  }
}

export interface DeliveryResult {
  delivery: PromptDelivery;
  problems: string[];
}

/**
 * Deliver a prompt and prove it landed: `prompt_async` (with the model override), verified by the session's message
 * count, 3 attempts `promptRetryDelayMs` apart; then typing it into the agent's pane; else report failure.
 */
export async function deliverPrompt(
  ctx: TeamsContext,
  api: OpencodeApi,
  sessionId: string,
  text: string,
  options: {
    model?: ModelRef;
    /** The pane to type into when the SDK fails; opened on demand (a spawn opens it after the prompt anyway). */
    pane?: () => Promise<PaneRef & { openedAt?: number }>;
    /** The session's message count when the caller knows it (a session just created has none). */
    messagesBefore?: number;
  } = {},
): Promise<DeliveryResult> {
  const delay = ctx.options.promptRetryDelayMs;
  const problems: string[] = [];
  let before: number;
  try {
    before = options.messagesBefore ?? (await api.messageCount(sessionId));
  } catch (error) {
    problems.push(`cannot read the session's messages: ${message(error)}`);
    before = Number.POSITIVE_INFINITY;
  }
  for (let attempt = 1; attempt <= 3; attempt++) {
    // A slow earlier attempt may have landed meanwhile: sending again would give the agent its prompt twice.
    if (attempt > 1 && (await landed(ctx.clock, api, sessionId, before, 0)))
      return { delivery: "sdk", problems };
    if (Number.isFinite(before)) {
      try {
        await api.promptAsync(sessionId, text, options.model ? { model: options.model } : {});
        if (await landed(ctx.clock, api, sessionId, before, delay)) return { delivery: "sdk", problems };
        problems.push(`attempt ${attempt}: accepted, but no new message appeared within ${delay} ms`);
      } catch (error) {
        problems.push(`attempt ${attempt}: ${message(error)}`);
        if (attempt < 3) await ctx.clock.sleep(delay);
      }
    } else if (attempt < 3) {
      await ctx.clock.sleep(delay);
      before = await api.messageCount(sessionId).catch(() => Number.POSITIVE_INFINITY);
    }
  }
  if (options.pane) {
    try {
      if (!Number.isFinite(before)) before = await api.messageCount(sessionId);
      else if (await landed(ctx.clock, api, sessionId, before, 0)) return { delivery: "sdk", problems };
      const pane = await options.pane();
      // Keystrokes sent before `opencode attach` has drawn its prompt are lost.
      const paneTiming = paneTimingOf(ctx);
      const readyAt = (pane.openedAt ?? 0) + paneTiming.tuiReadyMs;
      await ctx.clock.sleep(readyAt - ctx.clock.now());
      await ctx.edges.tmux.sendText(pane, text);
      if (await landed(ctx.clock, api, sessionId, before, Math.max(delay * 3, paneTiming.settleMs))) {
        return { delivery: "pane", problems };
      }
      problems.push("typing into the pane: no new message appeared");
    } catch (error) {
      problems.push(`typing into the pane: ${message(error)}`);
    }
  }
  return { delivery: "failed", problems };
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

async function removeAgentFiles(ctx: TeamsContext, teamName: string, agentId: string): Promise<void> {
  await ctx.edges.files.remove(ctx.store.paths.agentState(teamName, agentId));
  await ctx.edges.files.remove(ctx.store.paths.heartbeatSlot(teamName, agentId));
}

/** Per-step durations for the log (where a slow spawn spends its time), and progress shown to the caller. */
export class StepClock {
  readonly timings: Record<string, number> = {};
  private step = "validate";
  private startedAt: number;
  constructor(
    private readonly clock: Clock,
    private readonly report: SpawnProgress,
  ) {
    this.startedAt = clock.now();
  }
  mark(step: string): void {
    this.timings[this.step] = this.clock.now() - this.startedAt;
    this.step = step;
    this.startedAt = this.clock.now();
  }
  progress(step: string, text: string): void {
    this.mark(step);
    this.report(text);
  }
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

/**
 * Bring an agent up on a running project server: membership, session, color, pane, state, prompt, active, history.
 * Any failure is rolled back so no ghost agent (session, pane, color, member, file) remains.
 */
export async function launchAgent(
  ctx: TeamsContext,
  spec: LaunchSpec,
  steps: StepClock,
): Promise<OpResult<SpawnAgentOutput>> {
  const { team, server } = spec;
  const agentId = spec.agentId ?? uuidv4();
  const rollback = new Rollback(ctx);
  const warnings: string[] = [];
  try {
    const name = await reserveMember(ctx, team, agentId, spec.role, spec.name);
    rollback.push("the team membership", () => removeMember(ctx, team.name, agentId));

    if (spec.worktree) steps.progress("worktree", `Preparing the worktree of ${name}`);
    const place = await placeAgent(ctx, spec.worktree, spec.cwd, team.name, name);
    if (place.undo) rollback.push("the worktree", place.undo);
    const { cwd, worktree } = place;

    let sessionId: string;
    if (spec.reuseSessionId) {
      sessionId = spec.reuseSessionId;
    } else {
      steps.progress("session", `Creating the session for ${name}`);
      try {
        ({ id: sessionId } = await server.api.createSession({
          title: agentSessionTitle(team.name, name, agentId),
          directory: cwd,
        }));
      } catch (error) {
        throw new StepFailure(`Failed to create SDK session: ${message(error)}`);
      }
      const created = sessionId;
      rollback.push("the session", () => server.api.deleteSession(created));
    }

    const color = await allocateColor(ctx, team.name, agentId);
    rollback.push("the color", () => releaseColor(ctx, agentId));
    if (color.warning) warnings.push(color.warning);

    // The pane opens after the prompt is on its way: `opencode attach` takes a core for a second or two to boot, and
    // on a small machine the delivery should not have to compete with it.
    let pane: AgentPane | undefined;
    const openPane = async (): Promise<AgentPane> => {
      if (pane) return pane;
      steps.progress("pane", `Opening a tmux pane for ${name}`);
      let opened: AgentPane;
      try {
        opened = await openAgentPane(ctx, {
          teamName: team.name,
          agentId,
          name,
          role: spec.role,
          color: color.color,
          sessionId,
          cwd,
          serverUrl: server.url,
          credentials: server.credentials,
        });
      } catch (error) {
        throw new StepFailure(`Failed to create tmux pane: ${message(error)}`);
      }
      pane = opened;
      rollback.push("the pane", () => closeAgentPane(ctx, paneOwner(sessionId, opened)));
      return opened;
    };

    const now = isoNow(ctx.clock);
    const state: AgentState = {
      version: 1,
      agentId,
      name,
      teamName: team.name,
      role: spec.role,
      model: spec.model.model,
      ...(spec.model.providerId ? { providerId: spec.model.providerId } : {}),
      status: "spawning",
      color: color.color,
      heartbeatTs: now,
      heartbeatSource: "spawn",
      sessionId,
      cwd,
      ...(worktree ? { worktree } : {}),
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
    await ctx.store.createAgent(state);
    rollback.push("the agent file", () => removeAgentFiles(ctx, team.name, agentId));

    steps.progress("prompt", `Delivering the prompt to ${name}`);
    const promptText = typeof spec.message === "function" ? spec.message(agentId) : spec.message;
    const delivered = await deliverPrompt(ctx, server.api, sessionId, promptText, {
      // A new session has no messages; a continued one is counted first.
      ...(spec.reuseSessionId ? {} : { messagesBefore: 0 }),
      ...(spec.model.ref ? { model: spec.model.ref } : {}),
      ...(spec.headless
        ? {}
        : {
            pane: async () => {
              const opened = await openPane();
              return { ...agentPaneRef(paneOwner(sessionId, opened)), openedAt: opened.openedAt };
            },
          }),
    });
    const launchedPane = spec.headless ? undefined : await openPane();
    steps.mark("activate");
    const promptLanded = delivered.delivery !== "failed";
    if (!promptLanded) {
      warnings.push(
        `The initial prompt could not be delivered (${delivered.problems.join("; ")}). The agent stays 'spawning'; send it the prompt again as a message, or kill it.`,
      );
    }
    const registered = await recordLaunch(ctx, team.name, agentId, {
      activate: promptLanded,
      pane: launchedPane,
    });
    const status: SpawnAgentOutput["status"] = registered.status === "spawning" ? "spawning" : "active";
    if (registered.status === "terminated" && launchedPane && !team.keepPanes) {
      // It finished (complete-agent) before its pane was recorded, so nothing closed the pane: close it here.
      warnings.push(...(await closeAgentPane(ctx, paneOwner(sessionId, launchedPane), { interrupt: false })));
    }

    steps.mark("pane-check");
    // An agent that already ended has nothing left to check (and its pane was just closed on purpose).
    const paneToCheck = registered.status === "terminated" ? undefined : launchedPane;
    await Promise.all([
      paneToCheck
        ? confirmPaneStarted(ctx, paneToCheck, sessionId).catch((error: unknown) => {
            throw new StepFailure(`Failed to create tmux pane: ${message(error)}`);
          })
        : undefined,
      recountActiveSessions(ctx).catch((error: unknown) => {
        ctx.log("warn", "could not update activeSessions", { error: message(error) });
      }),
    ]);
    steps.mark("history");
    warnings.push(...(await agentSpawned(ctx, registered)));
    if (registered.status === "terminated") {
      // It ended before its run was in the history, so that end found nothing to close: record it now.
      warnings.push(
        ...(await agentEnded(ctx, registered, outcomeStatus(registered.outcome) ?? "completed", {
          reason: registered.statusReason ?? "ended while it was being spawned",
        })),
      );
    }
    steps.mark("done");
    ctx.log("info", `agent ${name} ${spec.resumes ? "resumed" : "spawned"} into ${team.name}`, {
      agentId,
      sessionId,
      paneId: launchedPane?.paneId,
      ...(spec.resumes ? { resumes: spec.resumes } : {}),
      timingsMs: steps.timings,
      delivery: delivered.delivery,
      ...(delivered.problems.length > 0 ? { deliveryProblems: delivered.problems } : {}),
    });
    return {
      success: true,
      agentId,
      sessionId,
      ...(launchedPane ? { paneId: launchedPane.paneId } : {}),
      name,
      color: color.color,
      port: server.info.port,
      status,
      promptDelivery: delivered.delivery,
      ...(worktree ? { worktree } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  } catch (error) {
    const problems = await rollback.run();
    const text = error instanceof StepFailure || error instanceof CallerError ? error.message : null;
    if (text === null) ctx.log("error", "launching an agent failed", { error: message(error) });
    return fail(
      text ?? `${spec.resumes ? "resume-agent" : "spawn-agent"} failed: ${message(error)}`,
      problems.map((p) => `Rollback: ${p}`),
    );
  }
}

/** The project's server, started when needed; a failure in the words of specs/spawn-agent.md. */
export async function projectServerOrFail(ctx: TeamsContext): Promise<ProjectServer | Failure> {
  try {
    if (!ctx.edges.ensureProjectServer) throw new Error("this process cannot start a project server");
    return await ctx.edges.ensureProjectServer();
  } catch (error) {
    return fail(
      error instanceof ServerStartError
        ? error.message
        : `Failed to start OpenCode server: ${message(error)}`,
    );
  }
}

/** spawn-agent (specs/spawn-agent.md): leader only. Validation and the server here; the rest is launchAgent. */
export async function spawnAgent(
  ctx: TeamsContext,
  input: SpawnAgentInput,
  callerSessionId: string,
  report: SpawnProgress = () => {},
): Promise<OpResult<SpawnAgentOutput>> {
  const steps = new StepClock(ctx.clock, report);
  assertTeamName(input.teamName);
  const team = await loadTeam(ctx, input.teamName);
  await requireLeader(ctx, team, callerSessionId, "Only the team leader can spawn agents");
  if (input.prompt.trim() === "") throw new CallerError("prompt must not be empty");
  const role = input.role ?? "worker";
  const headless = input.headless ?? false;
  const model = resolveModel(input, team);
  const requestedName =
    input.name === undefined ? undefined : validateLabel("agent name", input.name, NAME_MAX);
  const plan = input.plan === undefined ? undefined : validateLabel("plan", input.plan, PLAN_MAX);
  const cwd = await resolveCwd(ctx, input.cwd);
  const worktree = await planWorktree(ctx, team, input.worktree, cwd);
  if (input.timeoutMinutes !== undefined && !(input.timeoutMinutes > 0)) {
    throw new CallerError("timeoutMinutes must be a positive number");
  }
  if (!headless && !(await ctx.edges.tmux.available())) return fail("tmux is required for agent spawning");

  steps.progress("server", "Starting the OpenCode server");
  const server = await projectServerOrFail(ctx);
  if ("success" in server) return server;
  return launchAgent(
    ctx,
    {
      team,
      server,
      role,
      ...(requestedName !== undefined ? { name: requestedName } : {}),
      model,
      cwd,
      ...(worktree ? { worktree: { create: worktree } } : {}),
      headless,
      ...(input.timeoutMinutes !== undefined ? { timeoutMinutes: input.timeoutMinutes } : {}),
      ...(plan !== undefined ? { plan } : {}),
      taskPrompt: input.prompt,
      message: input.prompt,
    },
    steps,
  );
}

/**
 * Record the pane, and (when the prompt landed) spawning -> active with a fresh heartbeat, in one write under the
 * agent's lock. An agent that moved on meanwhile (its first heartbeat, or it completed) keeps its status.
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
  let written: AgentState | undefined;
  await ctx.store.withAgentLock(teamName, agentId, async () => {
    const read = await ctx.store.readAgent(teamName, agentId);
    if (read.kind !== "ok")
      throw new Error(`the agent file of ${agentId} could not be read back: ${read.kind}`);
    const activate = launch.activate && read.value.status === "spawning";
    written = {
      ...read.value,
      ...paneFields,
      ...(activate ? { status: "active" as const, heartbeatTs: now, heartbeatSource: "spawn" as const } : {}),
      updatedAt: now,
    };
    await ctx.store.writeAgent(written);
    if (activate) {
      await ctx.store.writeHeartbeat(teamName, agentId, {
        version: 1,
        heartbeatTs: now,
        source: "spawn",
        updates: 0,
      });
    }
  });
  if (!written) throw new Error(`the agent file of ${agentId} was not written`);
  return written;
}

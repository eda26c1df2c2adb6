import type { ServerCredentials } from "../../edges/server-auth.ts";
import type { PaneRef } from "../../edges/tmux-api.ts";
import type { AgentRole, TmuxPlacement } from "../../state/schemas.ts";
import type { PaneTiming, TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";

/** A team's window lives in a detached session of this name when the leader does not run inside tmux. */
export function teamSessionName(teamName: string): string {
  return `teams-${teamName}`;
}

export function teamWindowName(teamName: string): string {
  return `team-${teamName}`;
}

/**
 * Where a team's panes go: its own window, in the user's tmux session when this process runs inside tmux (and no
 * private socket is configured), otherwise in a detached session named after the team that the user can attach to.
 */
export async function resolvePlacement(ctx: TeamsContext, teamName: string): Promise<TmuxPlacement> {
  const window = teamWindowName(teamName);
  const socket = ctx.options.tmuxSocket;
  if (!socket) {
    const current = await ctx.edges.tmux.currentSession();
    if (current) return { session: current, window };
  }
  return { ...(socket ? { socket } : {}), session: teamSessionName(teamName), window };
}

export interface AgentPaneInput {
  teamName: string;
  agentId: string;
  name: string;
  role: AgentRole;
  color: string;
  sessionId: string;
  cwd: string;
  serverUrl: string;
  /** The credentials of the server the pane attaches to (ProjectServer.credentials). */
  credentials?: ServerCredentials;
}

export interface AgentPane {
  agentId: string;
  paneId: string;
  attachPid: number;
  placement: TmuxPlacement;
  /** ctx.clock time when the pane was opened. */
  openedAt: number;
  /** The program the pane runs (for the error when it does not start). */
  command: string;
}

/**
 * A program that cannot run `attach` exits within milliseconds of starting, while opencode itself takes a second to
 * boot; typed input reaches the attach TUI's prompt 1-5 s after the pane opened on a loaded 2-core machine (earlier
 * keystrokes are lost).
 */
export const DEFAULT_PANE_TIMING: Readonly<PaneTiming> = {
  settleMs: 250,
  execSettleMs: 100,
  exitGraceMs: 1_500,
  tuiReadyMs: 6_000,
};

export function paneTimingOf(ctx: Pick<TeamsContext, "paneTiming">): Readonly<PaneTiming> {
  return ctx.paneTiming ?? DEFAULT_PANE_TIMING;
}

/** How often a fresh pane's process is looked at while it settles. */
const SETTLE_POLL_MS = 20;

/**
 * Open the agent's pane running `opencode attach` on its session. The password reaches the pane through its
 * environment only. Pane creation for one team is serialised across processes so concurrent spawns share one window.
 */
export async function openAgentPane(ctx: TeamsContext, input: AgentPaneInput): Promise<AgentPane> {
  const placement = await resolvePlacement(ctx, input.teamName);
  const { credentials } = input;
  const env: Record<string, string> = credentials
    ? { OPENCODE_SERVER_PASSWORD: credentials.password, OPENCODE_SERVER_USERNAME: credentials.username }
    : {};
  const command = [
    ctx.edges.opencodeBinary?.() ?? "opencode",
    "attach",
    input.serverUrl,
    "--session",
    input.sessionId,
    "--dir",
    input.cwd,
  ];
  const openedAt = ctx.clock.now();
  const { paneId, panePid, server } = await ctx.store.withPaneLock(input.teamName, () =>
    ctx.edges.tmux.openPane({
      ...placement,
      cwd: input.cwd,
      command,
      env,
      title: `${input.name} (${input.role})`,
      layout: ctx.options.tmuxLayout,
      options: {
        opencode_session_id: input.sessionId,
        agent_id: input.agentId,
        agent_name: input.name,
        agent_color: input.color,
        team_name: input.teamName,
      },
    }),
  );
  return {
    agentId: input.agentId,
    paneId,
    attachPid: panePid,
    // The server's identity goes into the record with the pane: a restarted tmux server reuses pane ids.
    placement: { ...placement, server },
    openedAt,
    command: command[0] ?? "opencode",
  };
}

/**
 * Throws when the pane's command exited right away (a missing or broken binary). Waits only for what is left of
 * `settleMs` since the pane opened (`execSettleMs` when the pane's process is already our `opencode attach`). Its
 * waits are background waits: the check runs after the spawn has returned (pane-start-check.ts).
 */
export async function confirmPaneStarted(
  ctx: TeamsContext,
  pane: AgentPane,
  sessionId: string,
): Promise<void> {
  const paneTiming = paneTimingOf(ctx);
  const settledAt = pane.openedAt + paneTiming.settleMs;
  const { clock } = ctx;
  const sleepUntil = (at: number) => clock.sleep(at - clock.now(), undefined, { background: true });
  await sleepUntil(pane.openedAt + Math.min(paneTiming.execSettleMs, paneTiming.settleMs));
  while (clock.now() < settledAt) {
    // Its process runs attach on this session, so it is alive and so is its pane.
    if (await isOurAttach(ctx, pane.attachPid, sessionId)) return;
    await sleepUntil(Math.min(clock.now() + SETTLE_POLL_MS, settledAt));
  }
  if ((await ctx.edges.tmux.paneState(agentPaneRef(paneOwner(sessionId, pane)))) === "gone") {
    throw new Error(`the pane's command exited right away; is '${pane.command}' a runnable opencode binary?`);
  }
}

export interface PaneOwner {
  agentId: string;
  sessionId: string;
  paneId?: string;
  attachPid?: number;
  tmux?: TmuxPlacement;
}

/** The pane just opened for `sessionId`, as closeAgentPane takes it. */
export function paneOwner(sessionId: string, pane: AgentPane): PaneOwner & { paneId: string } {
  return {
    agentId: pane.agentId,
    sessionId,
    paneId: pane.paneId,
    attachPid: pane.attachPid,
    tmux: pane.placement,
  };
}

type PaneOwnerRef = Pick<PaneOwner, "agentId" | "paneId" | "tmux">;

/**
 * How tmux is asked about an agent's pane: every read and action checks the pane is still the agent's (its
 * `@agent_id`, and the tmux server it opened on), since a restarted tmux server hands the same ids to other panes.
 */
export function agentPaneRef(owner: PaneOwnerRef & { paneId: string }): PaneRef;
export function agentPaneRef(owner: PaneOwnerRef): PaneRef | undefined;
export function agentPaneRef(owner: PaneOwnerRef): PaneRef | undefined {
  if (owner.paneId === undefined) return undefined;
  return {
    socket: owner.tmux?.socket,
    paneId: owner.paneId,
    agentId: owner.agentId,
    ...(owner.tmux?.server === undefined ? {} : { server: owner.tmux.server }),
  };
}

/** Whether a pid still runs the `opencode attach` we started for this session (a reused pid belongs to someone else). */
async function isOurAttach(ctx: TeamsContext, pid: number, sessionId: string): Promise<boolean> {
  const argv = await ctx.edges.processes.commandLine(pid);
  return (
    argv?.includes("attach") === true &&
    argv.some((arg, index) => arg === "--session" && argv[index + 1] === sessionId)
  );
}

/**
 * Close an agent's pane (C-c unless `interrupt` is false, then kill-pane; only while the pane is still the agent's)
 * and make sure its `opencode attach` process is gone: a survivor is signalled by the pid we recorded, and only while
 * that pid still runs attach on this agent's session. Returns warnings for whatever could not be cleaned up.
 */
export async function closeAgentPane(
  ctx: TeamsContext,
  owner: PaneOwner,
  options: { interrupt?: boolean } = {},
): Promise<string[]> {
  const warnings: string[] = [];
  const ref = agentPaneRef(owner);
  if (ref) {
    try {
      await ctx.edges.tmux.closePane(ref, options);
    } catch (error) {
      warnings.push(`Could not close pane ${ref.paneId}: ${errorText(error)}`);
    }
  }
  const pid = owner.attachPid;
  if (pid === undefined) return warnings;
  const { processes } = ctx.edges;
  if (await processes.waitForExit(pid, paneTimingOf(ctx).exitGraceMs)) return warnings;
  if (!(await isOurAttach(ctx, pid, owner.sessionId))) return warnings;
  ctx.log("warn", `opencode attach ${pid} outlived its pane; terminating it`, { sessionId: owner.sessionId });
  const ours = () => isOurAttach(ctx, pid, owner.sessionId);
  // Its children go first, while the attach is alive to vouch for them: a child whose parent is still our verified
  // attach is its child, whereas a listed pid whose process has exited may since belong to anyone, and once the
  // attach is gone its orphans cannot be told from other processes. Both are re-checked before every signal.
  const children = await processes.children(pid);
  await Promise.all(
    children.map((child) =>
      processes.terminate(
        child,
        undefined,
        async () => (await processes.parent(child)) === pid && (await ours()),
      ),
    ),
  );
  const gone = await processes.terminate(pid, undefined, ours);
  if (!gone && (await ours())) warnings.push(`opencode attach process ${pid} survived SIGKILL`);
  return warnings;
}

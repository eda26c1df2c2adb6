import { agentPaneRef, teamSessionName, teamWindowName } from "../operations/agents/agent-pane.ts";
import type { TeamsContext } from "../operations/context.ts";
import { isRunning } from "../operations/liveness/heartbeat.ts";
import type { AgentState, TmuxPlacement } from "../state/schemas.ts";
import { resolveAgent, teamOrFail } from "./agent-ref.ts";
import { CliFailure } from "./command.ts";

/** Where `attach` takes the terminal: a tmux target on a server (its -L socket, if private). */
export interface AttachTarget {
  socket: string | undefined;
  session: string;
  /** `-t` for select-window / select-pane: the agent's pane id, or the team's window. */
  target: string;
  /** Whether the terminal is already inside a client of that tmux server (then switch-client, else attach). */
  inside: boolean;
  argv: string[][];
}

/** The placement of the team's window: from its newest agent with a pane, else the default detached session. */
function teamPlacement(agents: AgentState[], teamName: string): TmuxPlacement {
  const placed = agents
    .filter((agent) => agent.tmux)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0]?.tmux;
  return placed ?? { session: teamSessionName(teamName), window: teamWindowName(teamName) };
}

async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string }> {
  const child = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "ignore", env });
  const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  return { code, stdout: stdout.trim() };
}

function tmuxArgv(socket: string | undefined, ...args: string[]): string[] {
  return ["tmux", ...(socket ? ["-L", socket] : []), ...args];
}

/** Whether this terminal is a client of the tmux server `socket` names: $TMUX starts with that server's socket path. */
async function insideServer(socket: string | undefined, env: NodeJS.ProcessEnv): Promise<boolean> {
  const own = env.TMUX?.split(",")[0];
  if (!own) return false;
  const { code, stdout } = await run(tmuxArgv(socket, "display-message", "-p", "#{socket_path}"), {
    ...env,
    TMUX: "",
  });
  return code === 0 && stdout === own;
}

/** What `attach <team> [agent]` will run, after checking the team's window (and the agent's pane) is there. */
export async function attachTarget(
  ctx: TeamsContext,
  teamName: string,
  who: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<AttachTarget> {
  const team = await teamOrFail(ctx, teamName);
  const { items } = await ctx.store.listAgentViews(team.name);
  const placement = teamPlacement(
    items.map((view) => view.state),
    team.name,
  );
  let target = `=${placement.session}:=${placement.window}`;
  if (who !== undefined) {
    const agent = await resolveAgent(ctx, team, who);
    const ref = agent.paneId ? agentPaneRef({ ...agent, paneId: agent.paneId }) : undefined;
    if (!isRunning(agent.status) || !ref || (await ctx.edges.tmux.paneState(ref)) !== "alive") {
      throw new CliFailure(
        `${agent.name} has no open pane (it is ${agent.status}${agent.headless ? ", headless" : ""}).`,
        `opencode-teams attach ${team.name}`,
      );
    }
    target = ref.paneId;
  }
  const socket = placement.socket;
  const clean = { ...env, TMUX: "" };
  if ((await run(tmuxArgv(socket, "has-session", "-t", `=${placement.session}`), clean)).code !== 0) {
    throw new CliFailure(
      `Team '${team.name}' has no tmux window open (session '${placement.session}'${socket ? ` on socket '${socket}'` : ""} is not running).`,
      `opencode-teams status ${team.name}`,
    );
  }
  const inside = await insideServer(socket, env);
  const select = who === undefined ? [] : [tmuxArgv(socket, "select-window", "-t", target)];
  const focus = [
    ...select,
    tmuxArgv(socket, who === undefined ? "select-window" : "select-pane", "-t", target),
  ];
  const jump = inside
    ? tmuxArgv(socket, "switch-client", "-t", `=${placement.session}`)
    : tmuxArgv(socket, "attach-session", "-t", `=${placement.session}`);
  return { socket, session: placement.session, target, inside, argv: [...focus, jump] };
}

/**
 * Run the target's commands: the focus steps quietly, then the switch (inside tmux) or the attach, which takes over
 * this terminal until the person detaches. Returns tmux's exit code.
 */
export async function runAttach(plan: AttachTarget, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const steps = plan.argv.slice(0, -1);
  const jump = plan.argv.at(-1) ?? [];
  // Outside tmux a stale $TMUX of another server must not redirect the client; inside, tmux needs it to find us.
  const jumpEnv = plan.inside ? env : { ...env, TMUX: "" };
  for (const step of steps) {
    const { code } = await run(step, { ...env, TMUX: "" });
    if (code !== 0) throw new CliFailure(`tmux could not select ${plan.target} (it may have just closed).`);
  }
  const child = Bun.spawn(jump, { stdin: "inherit", stdout: "inherit", stderr: "inherit", env: jumpEnv });
  return child.exited;
}

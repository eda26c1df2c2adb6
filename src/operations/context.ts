import type { Clock } from "../clock.ts";
import type { FilesApi } from "../edges/files-api.ts";
import type { GitApi } from "../edges/git-api.ts";
import type { ProcessApi } from "../edges/host-process-api.ts";
import type { OpencodeApi } from "../edges/opencode-api.ts";
import type { ProjectServer, ServerManager, StartExtras } from "../edges/server-manager.ts";
import type { TmuxApi } from "../edges/tmux-api.ts";
import type { TeamsOptions } from "../options.ts";
import type { TeamStore } from "../state/team-store.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
export type Logger = (level: LogLevel, message: string, extra?: Record<string, unknown>) => void;

/** The outside world, behind interfaces so the domain logic runs against fakes in unit tests. */
export interface TeamsEdges {
  /** The project's `opencode serve` where agents' sessions live, or undefined when it is not running. */
  projectServer(): Promise<OpencodeApi | undefined>;
  /**
   * The project's server, started (detached, in the project root) when it is not running. Only spawning starts a
   * server; everything else uses projectServer(). Throws ServerStartError ("Failed to start OpenCode server: ...").
   * Absent where nothing is ever spawned (test fixtures of other operations). `extras` are asked only when this call
   * starts the server (the prewarm's warm-up provider).
   */
  ensureProjectServer?(extras?: StartExtras): Promise<ProjectServer>;
  /**
   * What the project server is (checked, never started), stopping it, and whether this process started it. Absent
   * where nothing looks at the server (test fixtures of other operations).
   */
  serverControl?: Pick<ServerManager, "report" | "stop" | "startedByThisProcess" | "forgetHealthy">;
  /** The `opencode` binary the agents' panes run (`opencode attach`): the one the project server runs. Default "opencode". */
  opencodeBinary?(): string;
  /** This process is the project server itself (started by ServerManager): there is nothing to prewarm. */
  insideProjectServer?: boolean;
  /** The OpenCode server of this process (the one that loaded the plugin); hosts the leader's session when the leader runs here. */
  localServer: OpencodeApi;
  tmux: TmuxApi;
  /** Processes by pid: an agent's `opencode attach`, a resume's claimant. */
  processes: ProcessApi;
  /** Filesystem checks on paths the caller names (a working directory, a worktree), and removing stray files. */
  files: FilesApi;
  /** git, for agents' worktrees (specs/worktrees.md). Absent where no worktree is ever made (fixtures of other operations). */
  git?: GitApi;
}

/** How long an agent's fresh pane is given at each step (agent-pane.ts, DEFAULT_PANE_TIMING). */
export interface PaneTiming {
  /** How long a fresh pane must stay up before its command counts as started (a missing binary exits at once). */
  settleMs: number;
  /** The same, once its process is seen running `opencode attach` on the session. */
  execSettleMs: number;
  /** How long a closed pane's attach process gets to exit by itself before it is signalled. */
  exitGraceMs: number;
  /** How long `opencode attach` needs after the pane opened before typed input reaches its prompt. */
  tuiReadyMs: number;
}

/** What every operation needs: the project's state, the time, the settings, the edges and somewhere to log. */
export interface TeamsContext {
  projectRoot: string;
  store: TeamStore;
  clock: Clock;
  options: TeamsOptions;
  log: Logger;
  edges: TeamsEdges;
  /** Pane timing; DEFAULT_PANE_TIMING when absent. Unit tests with fake panes set it to zero. */
  paneTiming?: PaneTiming;
}

import { z } from "zod";
import { BudgetSchema } from "./state/usage-schema.ts";

/** Plugin options (the second element of a `"plugin": [["…", { … }]]` entry). Defaults: the timing tables of specs/heartbeat.md and specs/spawn-agent.md. */
export const TeamsOptionsSchema = z.object({
  /** A heartbeat older than this counts a miss. */
  staleThresholdMs: z.number().int().positive().default(60_000),
  /** How often the stale sweep runs. */
  sweepIntervalMs: z.number().int().positive().default(15_000),
  /** Consecutive misses before an agent is declared inactive. */
  graceMisses: z.number().int().positive().default(2),
  /** A session reported busy with no event for longer than this is stale all the same. */
  busyCapMs: z
    .number()
    .int()
    .positive()
    .default(10 * 60_000),
  /** At most one heartbeat write per agent per this interval from OpenCode events. */
  eventCoalesceMs: z.number().int().min(0).default(5_000),
  /** Maximum entries kept in a team's agent-history.json. */
  historyMaxEntries: z.number().int().positive().default(50),
  /** How long a graceful kill waits for the agent to confirm before forcing. */
  shutdownTimeoutMs: z.number().int().positive().default(30_000),
  /** How long ensureRunning waits for a fresh `opencode serve` to answer its health check. */
  serverStartTimeoutMs: z.number().int().positive().default(30_000),
  /** tmux socket name (`tmux -L`); unset means the user's default server. */
  tmuxSocket: z.string().min(1).optional(),
  /** `select-layout` applied to a team's window after each new pane. */
  tmuxLayout: z
    .enum(["tiled", "even-horizontal", "even-vertical", "main-horizontal", "main-vertical"])
    .default("tiled"),
  /** The `opencode` binary for the project server and the agents' panes (else OPENCODE_TEAMS_OPENCODE_BIN, PATH). */
  opencodeBin: z.string().min(1).optional(),
  /** Pause between the 3 attempts to deliver a spawned agent's first prompt (also how long each is given to land). */
  promptRetryDelayMs: z.number().int().min(0).default(2_000),
  /**
   * Let spawn-agent start agents in a directory outside the project root, or in a git repository nested inside it
   * (OpenCode takes either for another project). Off: such a `cwd` is refused.
   */
  allowCwdOutsideProject: z.boolean().default(false),
  /** How long an agent may wait on a permission or question before the leader is reminded (once). */
  waitingRemindMs: z
    .number()
    .int()
    .positive()
    .default(10 * 60_000),
  /** What a headless agent's permission requests do: go to the leader, or be rejected at once. */
  headlessPermissions: z.enum(["leader", "reject"]).default("leader"),
  /** How often the background loop checks that the agents' panes still exist (one `tmux list-panes -a`). */
  paneWatchMs: z.number().int().positive().default(1_000),
  /**
   * The leader's notices (agent inactive, completed, timed out): the first goes at once, the ones that follow within
   * this window go together as one message when it ends.
   */
  noticeDigestMs: z.number().int().min(0).default(3_000),
  /**
   * How many messages each inbox keeps of those put into the recipient's session and not read, and as many of those
   * read-messages returned; older ones are deleted. A message that reached no one is never deleted.
   */
  inboxKeepRead: z.number().int().positive().default(50),
  /** Where agents' worktrees go (`<worktreeRoot>/<team>/<agent>`); default `<storage>/worktrees`. Relative: to the project root. */
  worktreeRoot: z.string().min(1).optional(),
  /** Keep every agent's worktree and branch when it ends, even a clean, unchanged one (specs/worktrees.md). */
  keepWorktrees: z.boolean().default(false),
  /**
   * Keep one spare checkout of the leader's HEAD per team that uses worktrees, made in the background, so spawn-agent
   * with a worktree takes it instead of waiting for a checkout (specs/worktrees.md).
   */
  spareWorktrees: z.boolean().default(true),
  /**
   * Start the project's `opencode serve` in the background as soon as it is likely needed (create-team; the plugin
   * loading in a project whose teams have running agents), so the first spawn-agent does not wait for its boot.
   */
  prewarmServer: z.boolean().default(true),
  /**
   * When the prewarm starts the project server, also run one throwaway turn in it against a local stand-in model
   * (never a real provider), so the first agent's turn finds OpenCode's per-project work done (specs/spawn-agent.md).
   */
  prewarmTurn: z.boolean().default(true),
  /** How many agents may run at once in a team (spawned and resumed; the leader not counted); create-team may set its own. */
  maxAgents: z.number().int().positive().max(1000).default(8),
  /** Each spawned agent's budget when spawn-agent gives none (specs/usage-and-budgets.md); unset: no limit. */
  agentBudget: BudgetSchema.optional(),
  /** Each new team's budget when create-team gives none; unset: no limit. */
  teamBudget: BudgetSchema.optional(),
  /** Turn the background monitor and sweep off (the CLI and tests that drive them by hand). */
  background: z.boolean().default(true),
});
export type TeamsOptions = z.infer<typeof TeamsOptionsSchema>;

export function parseOptions(raw: unknown): TeamsOptions {
  return TeamsOptionsSchema.parse(raw ?? {});
}

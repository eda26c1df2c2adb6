import { z } from "zod";
import { AgentUsageSchema, BudgetNoticeSchema, BudgetSchema, UsageTotalsSchema } from "./usage-schema.ts";

/** Every file we write carries this, so a later format change can migrate instead of guessing. */
export const SCHEMA_VERSION = 1;
export const version = z.literal(SCHEMA_VERSION);
export const isoDate = z.string().datetime({ offset: true });

export const TEAM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const AgentRoleSchema = z.enum(["leader", "worker", "reviewer"]);
export type AgentRole = z.infer<typeof AgentRoleSchema>;

export const AgentStatusSchema = z.enum([
  "spawning",
  "active",
  "idle",
  "inactive",
  "shutting_down",
  "terminated",
]);
export type AgentStatus = z.infer<typeof AgentStatusSchema>;

/** Where the last sign of life came from; shown to humans and kept for debugging false verdicts. */
export const HeartbeatSourceSchema = z.enum([
  "tool",
  "spawn",
  "sdk_session_idle",
  "sdk_session_updated",
  "sdk_session_status",
  "sdk_message",
  "sdk_tool_execute",
  "sweep_busy_check",
  "resume",
]);
export type HeartbeatSource = z.infer<typeof HeartbeatSourceSchema>;

export const TeamMemberSchema = z.object({
  agentId: z.string(),
  name: z.string(),
  role: AgentRoleSchema,
  joinedAt: isoDate,
});

export const TeamConfigSchema = z.object({
  version,
  name: z.string().regex(TEAM_NAME_PATTERN),
  description: z.string().optional(),
  createdAt: isoDate,
  leader: z.string(),
  leaderSessionId: z.string(),
  defaultModel: z.string().optional(),
  /** Keep an agent's pane open after it completes, so a human can read it. */
  keepPanes: z.boolean().default(false),
  /** spawn-agent's default for `worktree`: each agent in its own git worktree (specs/worktrees.md). */
  worktrees: z.boolean().optional(),
  /** What the team's agents together may spend, and how far the leader was told (specs/usage-and-budgets.md). */
  budget: BudgetSchema.optional(),
  budgetNotice: BudgetNoticeSchema.optional(),
  /** How many agents may run at once; the plugin option `maxAgents` when absent. */
  maxAgents: z.number().int().positive().optional(),
  members: z.array(TeamMemberSchema),
});
export type TeamConfig = z.infer<typeof TeamConfigSchema>;

/** Where an agent's pane lives; recorded so kill/resume target the right tmux server and window. */
export const TmuxPlacementSchema = z.object({
  socket: z.string().optional(),
  session: z.string(),
  window: z.string(),
  /**
   * Identity of the tmux server the pane opened on (`<server pid>:<start time>`): pane ids restart after a tmux
   * restart, so a pane on another server is never the agent's. Absent in records written before it was kept.
   */
  server: z.string().optional(),
});
export type TmuxPlacement = z.infer<typeof TmuxPlacementSchema>;

/**
 * A request the agent's session is blocked on: a tool call that needs a permission, or a question the agent asked.
 * While it is pending the agent is neither busy nor dead (see specs/heartbeat.md).
 */
export const WaitingForSchema = z.object({
  kind: z.enum(["permission", "question"]),
  requestId: z.string(),
  title: z.string(),
  /** What the permission covers (e.g. the command), when the server says. */
  pattern: z.string().optional(),
  /** What an "always" answer allows from then on (the server's `always` patterns), when the server says. */
  always: z.string().optional(),
  /** How many questions a question request asks at once, when more than one (each needs its own answer). */
  questions: z.number().int().min(2).optional(),
  /** The session that asked, when not the agent's own: a subagent's session the agent started (its task tool). */
  sessionId: z.string().optional(),
  since: isoDate,
  /** Set once the sweep reminded the leader that the request is still open (once per request). */
  remindedAt: isoDate.optional(),
});
export type WaitingFor = z.infer<typeof WaitingForSchema>;

/** An agent's own git worktree (specs/worktrees.md). */
export const AgentWorktreeSchema = z.object({
  /** The worktree's directory (the agent's cwd is in it). */
  path: z.string(),
  /** The branch checked out there, which the agent commits its work on. */
  branch: z.string(),
  /** The commit the branch started from: the leader's HEAD at spawn. */
  base: z.string(),
});
export type AgentWorktree = z.infer<typeof AgentWorktreeSchema>;

/** What kind of provider refusal ended an agent's turn (specs/heartbeat.md "A model that fails"). */
export const FailureKindSchema = z.enum([
  "auth",
  "quota",
  "model",
  "context_overflow",
  "output_length",
  "content_filter",
  "api",
  "other",
]);
export type FailureKind = z.infer<typeof FailureKindSchema>;

/** The agent's model ended a turn in an error and no turn has succeeded since. */
export const ModelFailureSchema = z.object({
  kind: FailureKindSchema,
  /** The error as the server put it, bounded and stripped of control characters. */
  error: z.string(),
  since: isoDate,
  /** Kinds the leader was told of during this failure (once per kind, until a turn succeeds). */
  notified: z.array(FailureKindSchema).default([]),
});
export type ModelFailure = z.infer<typeof ModelFailureSchema>;

export const AgentStateSchema = z.object({
  version,
  agentId: z.string(),
  name: z.string(),
  teamName: z.string(),
  role: AgentRoleSchema,
  model: z.string(),
  providerId: z.string().optional(),
  status: AgentStatusSchema,
  color: z.string(),
  /** Durable copy of the last heartbeat; the heartbeat slot file may hold a newer one. */
  heartbeatTs: isoDate,
  heartbeatSource: HeartbeatSourceSchema.optional(),
  sessionId: z.string(),
  paneId: z.string().optional(),
  tmux: TmuxPlacementSchema.optional(),
  attachPid: z.number().int().optional(),
  cwd: z.string(),
  consecutiveMisses: z.number().int().min(0),
  /** Start of the sweep interval in which the last miss was counted: two sweepers must not count one interval twice. */
  lastMissAt: isoDate.optional(),
  lastError: z.string().optional(),
  /** When lastError happened: an error older than the last sign of life no longer makes the agent unhealthy. */
  lastErrorAt: isoDate.optional(),
  /** Set while the model fails (an error ended the last turn); cleared by a turn that succeeds. */
  failing: ModelFailureSchema.nullable().optional(),
  sessionRotationCount: z.number().int().min(0),
  /** Last time the OpenCode server showed any activity for the session (caps how long "busy" is believed). */
  lastEventAt: isoDate.optional(),
  createdAt: isoDate,
  updatedAt: isoDate,
  terminatedAt: isoDate.optional(),
  statusReason: z.string().optional(),
  prompt: z.string(),
  headless: z.boolean().default(false),
  timeoutMinutes: z.number().positive().optional(),
  /** Short name of the plan or epic the agent works under (spawn-agent `plan`), for history and listings. */
  plan: z.string().optional(),
  worktree: AgentWorktreeSchema.optional(),
  resumes: z.string().optional(),
  /**
   * Set on an ended agent, under its lock, by the resume-agent call that continues it, before that call launches the
   * successor with this id: a concurrent resume sees it and is refused (see specs/resume-agent.md).
   */
  resumedBy: z.string().optional(),
  /** When resumedBy was set: a claim whose successor never got a record expires (a resume that crashed). */
  resumeClaimedAt: isoDate.optional(),
  /** The process that set resumedBy, and its host: a claim of this host holds exactly while that process runs. */
  resumeClaimPid: z.number().int().positive().optional(),
  resumeClaimHost: z.string().optional(),
  /** How the agent's run ended, once it did; history is rebuilt from this when agent-history.json is damaged. */
  outcome: z.enum(["completed", "failed", "timeout", "interrupted", "killed", "budget"]).optional(),
  /**
   * What this run spent (specs/usage-and-budgets.md). Counted into the heartbeat slot; the store's views put the
   * slot's count here, so a reader of a view finds it on the state; absent before any.
   */
  usage: AgentUsageSchema.optional(),
  /** A resumed run's session had spent this before the run began: `usage` is what the session spent since. */
  usageBase: AgentUsageSchema.optional(),
  /** What this run may spend before it is stopped, and how far it was told. */
  budget: BudgetSchema.optional(),
  budgetNotice: BudgetNoticeSchema.optional(),
  shutdownRequestedAt: isoDate.optional(),
  /**
   * Until when the graceful kill's caller waits for the confirmation. Its caller may die before (a cut-off tool call,
   * an OpenCode restart): the stale sweep then finishes the kill, so the agent never stays shutting_down for good.
   */
  shutdownDeadlineAt: isoDate.optional(),
  /** Set by the agent's own `confirm-shutdown` call: a graceful kill may finish now. */
  shutdownConfirmedAt: isoDate.optional(),
  tags: z.array(z.string()).default([]),
  /** The request the agent waits on; null (or absent in older records) when it waits on nothing. */
  waitingFor: WaitingForSchema.nullable().optional(),
  /**
   * The last request the leader was told of. Kept when waitingFor clears: a process whose event stream lags behind
   * can clear and set the same request again (a late idle, then the request), and the leader must hear of it once.
   */
  announcedRequestId: z.string().optional(),
});
export type AgentState = z.infer<typeof AgentStateSchema>;

/** Bounded free-form progress data an agent attaches to its heartbeat. */
export const HeartbeatMetadataSchema = z.record(z.string(), z.unknown());
export type HeartbeatMetadata = z.infer<typeof HeartbeatMetadataSchema>;

/** The frequently rewritten liveness record, kept apart from AgentState so heartbeats never rewrite it. */
export const HeartbeatRecordSchema = z.object({
  version,
  heartbeatTs: isoDate,
  source: HeartbeatSourceSchema,
  updates: z.number().int().min(0),
  metadata: HeartbeatMetadataSchema.optional(),
  /**
   * Last sign of life from the agent itself (a tool heartbeat or an OpenCode event), as opposed to the sweep vouching
   * for a busy session: caps how long "busy" alone keeps an agent alive.
   */
  lastEventAt: isoDate.optional(),
  /**
   * The run's usage as last counted (specs/usage-and-budgets.md): kept in the slot, rewritten in place, because the
   * event stream updates it as often as a heartbeat; readers see it as AgentState.usage (TeamStore's views).
   */
  usage: AgentUsageSchema.optional(),
});
export type HeartbeatRecord = z.infer<typeof HeartbeatRecordSchema>;

/** `completed`, `failed` and `cancelled` are final; only `completed` lets the tasks blocked by it go ahead. */
export const TaskStatusSchema = z.enum(["pending", "in_progress", "completed", "failed", "cancelled"]);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

export const TaskSchema = z.object({
  id: z.string(),
  title: z.string(),
  description: z.string().optional(),
  status: TaskStatusSchema,
  assignee: z.string().nullable(),
  createdBy: z.string(),
  createdAt: isoDate,
  updatedAt: isoDate,
  /** Why the task last went back to pending (e.g. its owner died). */
  reassignedReason: z.string().optional(),
  /** Ids of the tasks that must be completed before this one may start; boards written before it had none. */
  blockedBy: z.array(z.string()).default([]),
  /** Why the task failed or was cancelled. */
  reason: z.string().optional(),
});
export type Task = z.infer<typeof TaskSchema>;

/** Tags a board begun where the previous one was lost, so its ids never repeat the lost board's (specs/storage.md). */
export const TASK_SERIES_PATTERN = /^[0-9a-hjkmnp-tv-z]{5}$/;

export const TaskBoardSchema = z.object({
  version,
  nextId: z.number().int().min(1),
  series: z.string().regex(TASK_SERIES_PATTERN).optional(),
  /**
   * Which journal's records apply to this board (task-journal.ts): new on every rewrite. A board without one (the
   * first board, one written by an older version) uses no journal until its first change rewrites it.
   */
  generation: z.string().min(1).optional(),
  tasks: z.array(TaskSchema),
});
export type TaskBoard = z.infer<typeof TaskBoardSchema>;

export const InboxMessageTypeSchema = z.enum([
  "agent_inactive",
  "agent_completed",
  "agent_failed",
  "agent_timeout",
  /** The agent's model refused a turn (a bad key, a quota, an unknown model, ...): it cannot work until changed. */
  "agent_failing",
  "shutdown_request",
  "notice",
  /** Sent by a member (or a human) with send-message; every other type is a notice from the plugin. */
  "message",
]);
export type InboxMessageType = z.infer<typeof InboxMessageTypeSchema>;

export const InboxMessageSchema = z.object({
  version,
  id: z.string(),
  teamName: z.string(),
  to: z.string(),
  from: z.string(),
  type: InboxMessageTypeSchema,
  text: z.string(),
  createdAt: isoDate,
  data: z.record(z.string(), z.unknown()).optional(),
  /** The sender's name and role at sending time (messages only), for the header the recipient's model reads. */
  fromName: z.string().optional(),
  fromRole: z.string().optional(),
  /** false: put into the recipient's session without starting a turn (send-message `wake: false`). */
  wake: z.boolean().optional(),
  /**
   * Set (without fsync) just before a message is sent to its recipient's session: a later attempt that finds it, and
   * no deliveredAt, looks for the message in the session before sending it again.
   */
  attemptedAt: isoDate.optional(),
  /**
   * Notices only: the digest that took it, set before the digest is sent, so a retry that finds this id in the
   * leader's session marks the notice delivered instead of sending it again.
   */
  digestId: z.string().optional(),
  /** Set once the text was put into the recipient's OpenCode session (or handed over in a resume prompt). */
  deliveredAt: isoDate.optional(),
  /** Set when read-messages returned it to its recipient. */
  readAt: isoDate.optional(),
});
export type InboxMessage = z.infer<typeof InboxMessageSchema>;

/** When the last digest of notices reached the leader's session. */
export const NoticeDigestSchema = z.object({
  version,
  lastSentAt: isoDate,
});

/** When one sender's messages of the last minute were sent (send-message's rate limit). */
export const SendLogSchema = z.object({
  version,
  sentAt: z.array(isoDate),
});
export type SendLog = z.infer<typeof SendLogSchema>;

export const HistoryStatusSchema = z.enum([
  "spawned",
  "completed",
  "interrupted",
  "resumed",
  "failed",
  "timeout",
  "budget",
]);
export type HistoryStatus = z.infer<typeof HistoryStatusSchema>;

export const HistoryEntrySchema = z.object({
  agent_id: z.string(),
  agent_type: z.string(),
  name: z.string().optional(),
  task_description: z.string(),
  plan: z.string().optional(),
  /** The agent's git worktree, when it had one (specs/worktrees.md). */
  worktree: AgentWorktreeSchema.optional(),
  timestamp: isoDate,
  status: HistoryStatusSchema,
  completion_timestamp: isoDate.nullable(),
  resumes: z.string().optional(),
  resumed_by: z.string().optional(),
  summary: z.string().optional(),
  reason: z.string().optional(),
  /** What the run spent, as counted when it ended. */
  usage: UsageTotalsSchema.optional(),
});
export type HistoryEntry = z.infer<typeof HistoryEntrySchema>;

export const AgentHistorySchema = z.object({
  version,
  max_entries: z.number().int().min(1),
  entries: z.array(HistoryEntrySchema),
});
export type AgentHistory = z.infer<typeof AgentHistorySchema>;

/**
 * The credentials the project server was started with: a password generated for it (kept only here, in a 0600 file),
 * or the user's own OPENCODE_SERVER_PASSWORD, which is never written down and is read from the environment again.
 * Absent in files written before servers had a password.
 */
export const ServerAuthSchema = z.discriminatedUnion("source", [
  z.object({ source: z.literal("generated"), username: z.string().min(1), password: z.string().min(1) }),
  z.object({ source: z.literal("environment"), username: z.string().min(1) }),
]);
export type ServerAuth = z.infer<typeof ServerAuthSchema>;

export const ServerInfoSchema = z.object({
  version,
  projectPath: z.string(),
  pid: z.number().int(),
  port: z.number().int(),
  hostname: z.string(),
  startedAt: isoDate,
  activeSessions: z.number().int().min(0),
  logPath: z.string(),
  auth: ServerAuthSchema.optional(),
});
export type ServerInfo = z.infer<typeof ServerInfoSchema>;

import type { ProjectServer } from "../../edges/server-manager.ts";
import type { AgentWorktree, TeamConfig } from "../../state/schemas.ts";
import type { AgentUsage, Budget } from "../../state/usage-schema.ts";
import type { Failure } from "../result.ts";
import type { WorktreeRequest } from "../worktrees/worktrees.ts";
import type { ResolvedModel } from "./model.ts";
import type { PromptDelivery } from "./prompt-delivery.ts";

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
  /**
   * The project server, or the lookup of it still under way: spawn-agent asks for it once the call is validated and
   * reserves the member meanwhile; the launch waits for it before the session (a failure is rolled back like any step).
   */
  server: ProjectServer | Promise<ProjectServer | Failure>;
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
  /** What the run may spend, and what its (reused) session had spent before it (specs/usage-and-budgets.md). */
  budget?: Budget;
  usageBase?: AgentUsage;
}

/** What a launch has brought up so far: enough to open its pane, deliver its prompt and record it. */
export interface Launching {
  /** The project server the agent runs on. */
  server: ProjectServer;
  agentId: string;
  name: string;
  sessionId: string;
  cwd: string;
  worktree?: AgentWorktree;
  color: string;
  warnings: string[];
}

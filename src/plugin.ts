// Everything the plugin is made of. Kept out of index.ts because OpenCode treats every function a plugin module
// exports as a plugin.
import type { Hooks, PluginInput } from "@opencode-ai/plugin";
import { systemClock } from "./clock.ts";
import { localFiles } from "./edges/files.ts";
import { GitCli } from "./edges/git.ts";
import type { OpencodeApi } from "./edges/opencode-api.ts";
import { SdkOpencodeApi } from "./edges/opencode-client.ts";
import { hostProcesses } from "./edges/process-info.ts";
import { AUTH_SOURCE_ENV } from "./edges/server-auth.ts";
import { outsideServerEnv, restoreUserConfigContent } from "./edges/server-env.ts";
import { ServerManager } from "./edges/server-manager.ts";
import { TmuxCli } from "./edges/tmux.ts";
import type { Logger, TeamsContext } from "./operations/context.ts";
import { type LivenessHandle, startLiveness } from "./operations/liveness/background.ts";
import { identitySystemTransform } from "./operations/team/identity-prompt.ts";
import { parseOptions, type TeamsOptions } from "./options.ts";
import { resolveProjectRoot } from "./project-root.ts";
import { PROJECT_ROOT_ENV, resolveStorageRoot, StoragePaths } from "./state/paths.ts";
import { TeamStore } from "./state/team-store.ts";
import { agentDiffTool } from "./tools/agent-diff.ts";
import { agentHistoryTool } from "./tools/agent-history.ts";
import { answerPermissionTool } from "./tools/answer-permission.ts";
import { completeAgentTool } from "./tools/complete-agent.ts";
import { confirmShutdownTool } from "./tools/confirm-shutdown.ts";
import { createTeamTool } from "./tools/create-team.ts";
import { getAgentStatusTool } from "./tools/get-agent-status.ts";
import { heartbeatTool } from "./tools/heartbeat.ts";
import { killAgentTool } from "./tools/kill-agent.ts";
import { listAgentsTool } from "./tools/list-agents.ts";
import { mergeAgentTool } from "./tools/merge-agent.ts";
import { readMessagesTool } from "./tools/read-messages.ts";
import { requireCallerSession } from "./tools/result.ts";
import { resumeAgentTool } from "./tools/resume-agent.ts";
import { sendMessageTool } from "./tools/send-message.ts";
import { spawnAgentTool } from "./tools/spawn-agent.ts";
import { claimTaskTool, createTaskTool, listTasksTool, updateTaskTool } from "./tools/tasks.ts";

function serverLogger(input: PluginInput): Logger {
  return (level, message, extra) => {
    // Never print: stdout belongs to the user's TUI. The server log is where OpenCode keeps plugin logs.
    void Promise.resolve()
      .then(() => input.client.app.log({ body: { service: "opencode-teams", level, message, extra } }))
      .catch(() => {});
  };
}

/** This process is the `opencode serve` ServerManager started for the project (it carries the project's markers). */
function isProjectServer(projectRoot: string): boolean {
  return process.env[AUTH_SOURCE_ENV] !== undefined && process.env[PROJECT_ROOT_ENV] === projectRoot;
}

/** A context for one project; the plugin and the CLI differ only in their logger and their own server. */
export function buildContext(input: {
  projectRoot: string;
  options: TeamsOptions;
  log: Logger;
  localServer: OpencodeApi;
}): TeamsContext {
  const store = new TeamStore(new StoragePaths(resolveStorageRoot(input.projectRoot)));
  // An older version left the storage dir readable by other users: close it as soon as a context exists.
  void store
    .secureRoot()
    .then((tightened) => {
      if (tightened)
        input.log("warn", "the storage dir was readable by other users; it is now 0700", {
          root: store.paths.root,
        });
    })
    .catch(() => {});
  const servers = new ServerManager({
    projectRoot: input.projectRoot,
    paths: store.paths,
    startTimeoutMs: input.options.serverStartTimeoutMs,
    opencodeBin: input.options.opencodeBin,
    log: input.log,
  });
  return {
    projectRoot: input.projectRoot,
    store,
    clock: systemClock,
    options: input.options,
    log: input.log,
    edges: {
      projectServer: async () => (await servers.current())?.api,
      ensureProjectServer: (extras) => servers.ensureRunning(extras),
      insideProjectServer: isProjectServer(input.projectRoot),
      serverControl: servers,
      opencodeBinary: () => servers.opencodeBinary(),
      localServer: input.localServer,
      tmux: new TmuxCli("tmux", outsideServerEnv(process.env)),
      processes: hostProcesses,
      files: localFiles,
      git: new GitCli("git", outsideServerEnv(process.env), (change) => store.withWorktreeChangeLock(change)),
    },
  };
}

export function createContext(input: PluginInput, rawOptions: unknown): TeamsContext {
  const projectRoot = resolveProjectRoot(input);
  // Inside the project server started with the warm-up provider: this instance's config is read; nothing started from
  // here on (agents' shells, tmux, other directories' instances) gets the provider (specs/spawn-agent.md).
  if (isProjectServer(projectRoot)) restoreUserConfigContent(process.env);
  return buildContext({
    projectRoot,
    options: parseOptions(rawOptions),
    log: serverLogger(input),
    localServer: new SdkOpencodeApi(input.serverUrl.toString(), { directory: projectRoot }, input.client),
  });
}

export function createTools(ctx: TeamsContext): NonNullable<Hooks["tool"]> {
  return requireCallerSession(toolsOf(ctx), ctx.log);
}

function toolsOf(ctx: TeamsContext): NonNullable<Hooks["tool"]> {
  return {
    "create-team": createTeamTool(ctx),
    "create-task": createTaskTool(ctx),
    "update-task": updateTaskTool(ctx),
    "list-tasks": listTasksTool(ctx),
    "claim-task": claimTaskTool(ctx),
    "list-agents": listAgentsTool(ctx),
    "agent-history": agentHistoryTool(ctx),
    heartbeat: heartbeatTool(ctx),
    "get-agent-status": getAgentStatusTool(ctx),
    "spawn-agent": spawnAgentTool(ctx),
    "kill-agent": killAgentTool(ctx),
    "confirm-shutdown": confirmShutdownTool(ctx),
    "complete-agent": completeAgentTool(ctx),
    "resume-agent": resumeAgentTool(ctx),
    "answer-permission": answerPermissionTool(ctx),
    "agent-diff": agentDiffTool(ctx),
    "merge-agent": mergeAgentTool(ctx),
    "send-message": sendMessageTool(ctx),
    "read-messages": readMessagesTool(ctx),
  };
}

/**
 * Every agent session gets its identity in the system prompt; the session title (from its creation event, else read
 * once from the server) says whose it is.
 */
export function createIdentityHook(ctx: TeamsContext, input: PluginInput) {
  return identitySystemTransform(ctx, async (sessionId) => {
    // Bounded: this runs before every model call of every session.
    const result = await input.client.session.get({
      path: { id: sessionId },
      signal: AbortSignal.timeout(2_000),
    });
    return result.data?.title;
  });
}

/** The event monitor and stale sweep, shared by every plugin instance of this process; off with `background: false`. */
export function startBackground(ctx: TeamsContext): LivenessHandle | undefined {
  return ctx.options.background ? startLiveness(ctx) : undefined;
}

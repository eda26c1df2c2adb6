// Everything the plugin is made of. Kept out of index.ts because OpenCode treats every function a plugin module
// exports as a plugin.
import type { Hooks, PluginInput } from "@opencode-ai/plugin";
import { systemClock } from "./clock.ts";
import type { OpencodeApi } from "./edges/opencode-api.ts";
import { SdkOpencodeApi, serverAuthFromEnv } from "./edges/opencode-client.ts";
import { pidAlive } from "./edges/process.ts";
import { TmuxCli } from "./edges/tmux.ts";
import type { Logger, TeamsContext } from "./operations/context.ts";
import { parseOptions, type TeamsOptions } from "./options.ts";
import { resolveProjectRoot } from "./project-root.ts";
import { resolveStorageRoot, StoragePaths } from "./state/paths.ts";
import { ServerInfoSchema } from "./state/schemas.ts";
import { readJson } from "./state/store.ts";
import { TeamStore } from "./state/team-store.ts";
import { agentHistoryTool } from "./tools/agent-history.ts";
import { createTeamTool } from "./tools/create-team.ts";
import { listAgentsTool } from "./tools/list-agents.ts";
import { createTaskTool, listTasksTool, updateTaskTool } from "./tools/tasks.ts";

function serverLogger(input: PluginInput): Logger {
  return (level, message, extra) => {
    // Never print: stdout belongs to the user's TUI. The server log is where OpenCode keeps plugin logs.
    void Promise.resolve()
      .then(() => input.client.app.log({ body: { service: "opencode-teams", level, message, extra } }))
      .catch(() => {});
  };
}

/** The project's recorded `opencode serve`, when its process is still there. */
async function recordedProjectServer(
  store: TeamStore,
  projectRoot: string,
): Promise<OpencodeApi | undefined> {
  const info = await readJson(store.paths.serverInfo(projectRoot), ServerInfoSchema);
  if (info.kind !== "ok" || !pidAlive(info.value.pid)) return undefined;
  return new SdkOpencodeApi(`http://${info.value.hostname}:${info.value.port}`, {
    directory: projectRoot,
    ...serverAuthFromEnv(),
  });
}

/** A context for one project; the plugin and the CLI differ only in their logger and their own server. */
export function buildContext(input: {
  projectRoot: string;
  options: TeamsOptions;
  log: Logger;
  localServer: OpencodeApi;
}): TeamsContext {
  const store = new TeamStore(new StoragePaths(resolveStorageRoot(input.projectRoot)));
  return {
    projectRoot: input.projectRoot,
    store,
    clock: systemClock,
    options: input.options,
    log: input.log,
    edges: {
      projectServer: () => recordedProjectServer(store, input.projectRoot),
      localServer: input.localServer,
      tmux: new TmuxCli(),
    },
  };
}

export function createContext(input: PluginInput, rawOptions: unknown): TeamsContext {
  const projectRoot = resolveProjectRoot(input);
  return buildContext({
    projectRoot,
    options: parseOptions(rawOptions),
    log: serverLogger(input),
    localServer: new SdkOpencodeApi(input.serverUrl.toString(), { directory: projectRoot }, input.client),
  });
}

export function createTools(ctx: TeamsContext): NonNullable<Hooks["tool"]> {
  return {
    "create-team": createTeamTool(ctx),
    "create-task": createTaskTool(ctx),
    "update-task": updateTaskTool(ctx),
    "list-tasks": listTasksTool(ctx),
    "list-agents": listAgentsTool(ctx),
    "agent-history": agentHistoryTool(ctx),
  };
}

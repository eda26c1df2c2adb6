// Everything the plugin is made of. Kept out of index.ts because OpenCode treats every function a plugin module
// exports as a plugin.
import type { Hooks, PluginInput } from "@opencode-ai/plugin";
import { systemClock } from "./clock.ts";
import type { Logger, TeamsContext } from "./operations/context.ts";
import { parseOptions } from "./options.ts";
import { resolveProjectRoot } from "./project-root.ts";
import { resolveStorageRoot, StoragePaths } from "./state/paths.ts";
import { TeamStore } from "./state/team-store.ts";
import { createTeamTool } from "./tools/create-team.ts";
import { createTaskTool, listTasksTool, updateTaskTool } from "./tools/tasks.ts";

function serverLogger(input: PluginInput): Logger {
  return (level, message, extra) => {
    // Never print: stdout belongs to the user's TUI. The server log is where OpenCode keeps plugin logs.
    void Promise.resolve()
      .then(() => input.client.app.log({ body: { service: "opencode-teams", level, message, extra } }))
      .catch(() => {});
  };
}

export function createContext(input: PluginInput, rawOptions: unknown): TeamsContext {
  const projectRoot = resolveProjectRoot(input);
  return {
    projectRoot,
    store: new TeamStore(new StoragePaths(resolveStorageRoot(projectRoot))),
    clock: systemClock,
    options: parseOptions(rawOptions),
    log: serverLogger(input),
  };
}

export function createTools(ctx: TeamsContext): NonNullable<Hooks["tool"]> {
  return {
    "create-team": createTeamTool(ctx),
    "create-task": createTaskTool(ctx),
    "update-task": updateTaskTool(ctx),
    "list-tasks": listTasksTool(ctx),
  };
}

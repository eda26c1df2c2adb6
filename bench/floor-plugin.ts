/**
 * The floor of figure 6 as a tool of the leader's own OpenCode, loaded beside opencode-teams: spawn-agent runs inside
 * a leader's turn, in the process that is busy with that turn, and its floor is timed the same way (OpenCode's record
 * of the tool's execution) in the same process, so both pay what the turn costs and only the plugin's own work differs.
 */
import { type Plugin, tool } from "@opencode-ai/plugin";
import { handSpawn, projectOf, serverInfo } from "./hand-spawn.ts";

// Only the plugin is exported: OpenCode calls every exported function of a plugin module.
export const BenchFloorPlugin: Plugin = async (_input, options) => {
  const socket = String(options?.tmuxSocket ?? "");
  const opencodeBin = String(options?.opencodeBin ?? "opencode");
  return {
    tool: {
      "bench-hand-spawn": tool({
        description: "Bench only: POST /session, prompt_async and a tmux pane with opencode attach, by hand.",
        args: { title: tool.schema.string() },
        async execute(args, context) {
          const info = serverInfo(context.directory);
          if (!info) throw new Error("no project server recorded yet (spawn an agent first)");
          const spawned = await handSpawn(
            projectOf(info, context.directory),
            { socket, opencodeBin },
            args.title,
          );
          return JSON.stringify(spawned);
        },
      }),
    },
  };
};

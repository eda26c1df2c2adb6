import type { Plugin } from "@opencode-ai/plugin";
import { prewarmIfAgentsRun } from "./operations/server/prewarm.ts";
import { releaseProjectServer } from "./operations/server/server-control.ts";
import { stopWarmup } from "./operations/server/warmup.ts";
import { createContext, createIdentityHook, createTools, startBackground } from "./plugin.ts";

// Only the plugin itself is exported: OpenCode calls every exported function of this module as a plugin.
export const OpencodeTeamsPlugin: Plugin = async (input, options) => {
  const ctx = createContext(input, options);
  const liveness = startBackground(ctx);
  // A leader coming back to a team with running agents will likely spawn or resume soon.
  void prewarmIfAgentsRun(ctx);
  const identity = createIdentityHook(ctx, input);
  return {
    tool: createTools(ctx),
    "experimental.chat.system.transform": identity.transform,
    // Sessions living in this process report here; the monitor queues the event and returns at once.
    event: async ({ event }) => {
      identity.learn(event);
      return liveness?.monitor.handleEvent(event);
    },
    dispose: async () => {
      await liveness?.release();
      // A warm-up turn left running would retry against its closed endpoint for as long as the server lives.
      await stopWarmup(ctx);
      await releaseProjectServer(ctx).catch((error: unknown) => {
        ctx.log(
          "warn",
          `could not stop the project server: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    },
  };
};

export default OpencodeTeamsPlugin;

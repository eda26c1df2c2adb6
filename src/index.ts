import type { Plugin } from "@opencode-ai/plugin";
import { createContext, createTools } from "./plugin.ts";

// Only the plugin itself is exported: OpenCode calls every exported function of this module as a plugin.
export const OpencodeTeamsPlugin: Plugin = async (input, options) => {
  const ctx = createContext(input, options);
  return {
    tool: createTools(ctx),
  };
};

export default OpencodeTeamsPlugin;

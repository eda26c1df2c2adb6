import { existsSync, readFileSync } from "node:fs";
import { parseOptions, type TeamsOptions } from "../options.ts";
import { configFiles, parseConfig } from "./plugin-config.ts";

/**
 * The options the project's OpenCode gives the plugin (`"plugin": [["opencode-teams@…", { … }]]`), so that what the
 * CLI does for a person (a resume opening a pane, a kill's timeouts) happens where and as the leader's plugin would:
 * the team's tmux socket above all. The project's config wins over the user's, as in OpenCode. Options that do not
 * parse are reported and the defaults used.
 */
export function projectPluginOptions(projectRoot: string, warn: (text: string) => void): TeamsOptions {
  const defaults = { background: false };
  for (const scope of ["project", "global"] as const) {
    for (const file of configFiles(scope, projectRoot)) {
      if (!existsSync(file)) continue;
      let entry: unknown;
      try {
        const parsed = parseConfig(readFileSync(file, "utf8"), file);
        const index = parsed.ours[0];
        entry = index === undefined ? undefined : parsed.plugins[index];
      } catch (error) {
        warn(
          `${error instanceof Error ? error.message : String(error)}; the plugin's default options are used`,
        );
        continue;
      }
      if (entry === undefined) continue;
      const options =
        Array.isArray(entry) && typeof entry[1] === "object" && entry[1] !== null ? entry[1] : {};
      try {
        return parseOptions({ ...options, ...defaults });
      } catch (error) {
        warn(
          `the plugin options in ${file} are not valid (${error instanceof Error ? error.message : String(error)}); the defaults are used`,
        );
        return parseOptions(defaults);
      }
    }
  }
  return parseOptions(defaults);
}

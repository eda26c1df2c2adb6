// The environment of the project's server: what it is started with (credentials and this project's markers), how a
// process is recognised as this project's server by those markers, and what is taken out again for programs that
// outlive the server.
import { PROJECT_ROOT_ENV, STORAGE_DIR_ENV } from "../state/paths.ts";
import type { ServerAuth } from "../state/schemas.ts";
import { AUTH_SOURCE_ENV, type ServerCredentials } from "./server-auth.ts";
import { processEnvironment } from "./server-identity.ts";

/**
 * Every plugin instance inside the server (one per directory) resolves the leader's root and storage from these, and
 * they mark the process as this project's server should its record be lost.
 */
export function projectMarkers(projectRoot: string, storageRoot: string): Record<string, string> {
  return { [PROJECT_ROOT_ENV]: projectRoot, [STORAGE_DIR_ENV]: storageRoot };
}

/** Set when the server's OPENCODE_CONFIG_CONTENT is ours (the user's own plus the warm-up provider). */
export const CONFIG_CONTENT_ADDED_ENV = "OPENCODE_TEAMS_CONFIG_CONTENT_ADDED";
/** The user's own OPENCODE_CONFIG_CONTENT, kept while ours stands in for it (absent: the user had none). */
export const USER_CONFIG_CONTENT_ENV = "OPENCODE_TEAMS_USER_CONFIG_CONTENT";

/**
 * `configContent`, when given, replaces OPENCODE_CONFIG_CONTENT: the user's own with the prewarm's warm-up provider
 * added (warmup-config.ts), never instead of it. The user's own is kept beside it, for restoreUserConfigContent.
 */
export function serverEnv(
  env: NodeJS.ProcessEnv,
  auth: ServerAuth,
  credentials: ServerCredentials,
  markers: Record<string, string>,
  configContent?: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  // The server outlives the terminal it was started from; a stale $TMUX would point the plugin inside it at that
  // terminal's tmux session.
  delete out.TMUX;
  delete out.TMUX_PANE;
  return {
    ...out,
    ...markers,
    ...(configContent !== undefined
      ? {
          OPENCODE_CONFIG_CONTENT: configContent,
          [CONFIG_CONTENT_ADDED_ENV]: "1",
          ...(out.OPENCODE_CONFIG_CONTENT !== undefined
            ? { [USER_CONFIG_CONTENT_ENV]: out.OPENCODE_CONFIG_CONTENT }
            : {}),
        }
      : {}),
    [AUTH_SOURCE_ENV]: auth.source,
    OPENCODE_SERVER_USERNAME: credentials.username,
    OPENCODE_SERVER_PASSWORD: credentials.password,
  };
}

/**
 * Put the user's own OPENCODE_CONFIG_CONTENT back in `env` (in place) where serverEnv gave ours; whether it did. The
 * plugin does it to the project server's own environment when it loads there: OpenCode has read its config by then
 * (the provider stays in that instance), and what the server starts afterwards (the agents' shells, tmux, git, an
 * `opencode` an agent runs, another directory's instance) gets the user's config without the warm-up provider, whose
 * endpoint is gone after the warm-up.
 */
export function restoreUserConfigContent(env: NodeJS.ProcessEnv): boolean {
  if (env[CONFIG_CONTENT_ADDED_ENV] === undefined) return false;
  const user = env[USER_CONFIG_CONTENT_ENV];
  if (user === undefined) delete env.OPENCODE_CONFIG_CONTENT;
  else env.OPENCODE_CONFIG_CONTENT = user;
  delete env[CONFIG_CONTENT_ADDED_ENV];
  delete env[USER_CONFIG_CONTENT_ENV];
  return true;
}

/**
 * The environment without what serverEnv added, for programs the plugin starts from inside our server that outlive
 * it or serve the user (a tmux server started here would hand the password and the leader's root to every shell the
 * user opens in it). Unchanged outside our server.
 */
export function outsideServerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const source = env[AUTH_SOURCE_ENV];
  if (!source) return env;
  const out = { ...env };
  restoreUserConfigContent(out);
  for (const key of [AUTH_SOURCE_ENV, PROJECT_ROOT_ENV, STORAGE_DIR_ENV]) delete out[key];
  if (source === "generated") {
    delete out.OPENCODE_SERVER_PASSWORD;
    delete out.OPENCODE_SERVER_USERNAME;
  }
  return out;
}

/** The environment of a process started by us for this project (its markers match), else undefined. */
export async function markedEnvironment(
  pid: number,
  markers: Record<string, string>,
): Promise<Record<string, string> | undefined> {
  const env = await processEnvironment(pid);
  const ours = env !== undefined && Object.entries(markers).every(([key, value]) => env[key] === value);
  return ours ? env : undefined;
}

/**
 * The process carries this project's markers. Without /proc (not Linux) another process's environment cannot be
 * read and the command line and socket checks have to do.
 */
export async function carriesMarkers(pid: number, markers: Record<string, string>): Promise<boolean> {
  if (process.platform !== "linux") return true;
  return (await markedEnvironment(pid, markers)) !== undefined;
}

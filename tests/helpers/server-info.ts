import { readFileSync } from "node:fs";
import { ServerManager } from "../../src/edges/server-manager.ts";
import type { TeamsContext } from "../../src/operations/context.ts";
import type { StoragePaths } from "../../src/state/paths.ts";
import { type ServerInfo, ServerInfoSchema } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";

/** The fields a test chooses for a recorded server; the rest defaults to a server just started with no sessions. */
export type ServerInfoFields = Pick<ServerInfo, "pid" | "port"> & Partial<ServerInfo>;

/** Write `projectDir`'s server.json (under `paths`) as a started server would, `fields` over plain defaults. */
export async function writeServerInfo(
  projectDir: string,
  paths: StoragePaths,
  fields: ServerInfoFields,
): Promise<void> {
  await writeJson(paths.serverInfo(projectDir), ServerInfoSchema, {
    version: 1,
    projectPath: projectDir,
    hostname: "127.0.0.1",
    startedAt: new Date().toISOString(),
    activeSessions: 0,
    logPath: paths.serverLog(projectDir),
    ...fields,
  });
}

/** Record the context's project server on `port` (this process's pid, so it counts as alive), started by its clock. */
export async function recordServerInfo(
  ctx: TeamsContext,
  port: number,
  info: Partial<Omit<ServerInfo, "port">> = {},
): Promise<void> {
  const startedAt = new Date(ctx.clock.now()).toISOString();
  await writeServerInfo(ctx.projectRoot, ctx.store.paths, { pid: process.pid, port, startedAt, ...info });
}

/** A server.json as the schema reads it; throws when it is missing or does not fit. */
export function readServerInfo(file: string): ServerInfo {
  return ServerInfoSchema.parse(JSON.parse(readFileSync(file, "utf8")));
}

/**
 * Point the context's project server at the one recorded in server.json (a test records the harness's own server
 * there): used as it is, never started or replaced, as the plugin reuses a protected server.
 */
export function useRecordedProjectServer(ctx: TeamsContext): TeamsContext {
  const servers = new ServerManager({
    projectRoot: ctx.projectRoot,
    paths: ctx.store.paths,
    startTimeoutMs: 30_000,
  });
  ctx.edges.ensureProjectServer = async () => {
    const current = await servers.current();
    if (!current) throw new Error("the recorded project server is not running");
    return current;
  };
  return ctx;
}

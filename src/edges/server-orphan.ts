// Our server whose record (server.json) was lost or damaged: found by its ports and this project's markers, and taken
// back with the password in its own environment, or stopped when that cannot be read.
import type { ServerInfo } from "../state/schemas.ts";
import { AUTH_SOURCE_ENV, probeHealthRepeatedly } from "./server-auth.ts";
import { markedEnvironment } from "./server-env.ts";
import type { ServerFiles } from "./server-files.ts";
import { checkListener, listeningSockets, socketOwners } from "./server-identity.ts";
import type { ServerInspector } from "./server-inspection.ts";
import { candidatePorts, HOSTNAME, urlOf } from "./server-ports.ts";

/**
 * Our server when server.json is lost or damaged: a listener on one of the project's ports whose process runs our
 * serve command and carries this project's root and storage in its environment (a server the user started by hand
 * does not, and is never touched).
 */
export async function findOrphan(
  projectRoot: string,
  markers: Record<string, string>,
): Promise<{ pid: number; port: number; env: Record<string, string> } | undefined> {
  const listeners = await listeningSockets();
  if (!listeners) return undefined;
  for (const port of candidatePorts(projectRoot)) {
    const inodes = listeners.get(port);
    if (!inodes) continue;
    for (const pid of await socketOwners(inodes)) {
      if ((await checkListener(pid, HOSTNAME, port)) !== "ours") continue;
      const env = await markedEnvironment(pid, markers);
      if (env) return { pid, port, env };
    }
  }
  return undefined;
}

/**
 * Take back our server whose record was lost: recorded again, with whether its health check answered. Its password
 * lives on in its own environment (readable by this user only, like server.json): reading it there keeps the agents
 * that use the server running. If it cannot be read, nobody can use that server any more; it is stopped (it is
 * verified ours) and undefined returned for a fresh one to be started.
 */
export async function adoptOrphan(
  projectRoot: string,
  markers: Record<string, string>,
  files: ServerFiles,
  inspector: ServerInspector,
): Promise<{ info: ServerInfo; healthy: boolean } | undefined> {
  const orphan = await findOrphan(projectRoot, markers);
  if (!orphan) return undefined;
  const password = orphan.env.OPENCODE_SERVER_PASSWORD;
  const username = orphan.env.OPENCODE_SERVER_USERNAME || "opencode";
  if (password) {
    const info: ServerInfo = {
      version: 1,
      projectPath: projectRoot,
      pid: orphan.pid,
      port: orphan.port,
      hostname: HOSTNAME,
      startedAt: new Date().toISOString(),
      activeSessions: 0,
      logPath: files.logPath,
      // The user's own password stays unwritten, as when the server was started.
      auth:
        orphan.env[AUTH_SOURCE_ENV] === "environment"
          ? { source: "environment", username }
          : { source: "generated", username, password },
    };
    const health = await probeHealthRepeatedly(urlOf(orphan.port), { username, password }, 3);
    if (health !== "unauthorized") {
      await files.write(info);
      await files.note(
        "warn",
        `server.json was missing or damaged; recorded our running server pid ${orphan.pid} again`,
      );
      return { info, healthy: health === "healthy" };
    }
  }
  await files.note(
    "warn",
    `our server pid ${orphan.pid} lost its record and its password cannot be recovered; stopping it and starting a fresh one`,
  );
  await inspector.terminate(orphan.pid);
  return undefined;
}

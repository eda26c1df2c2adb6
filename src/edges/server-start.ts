// Starting the project's `opencode serve`: a free port near the project's own, a detached child with the password in
// its environment and its output in the server log, and the wait until it answers its health check.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, fchmodSync, openSync, writeSync } from "node:fs";
import { stat } from "node:fs/promises";
import type { ServerInfo } from "../state/schemas.ts";
import { terminateProcess } from "./process-info.ts";
import { newServerAuth, probeHealth, type ServerCredentials } from "./server-auth.ts";
import { serverEnv } from "./server-env.ts";
import type { ServerFiles } from "./server-files.ts";
import { checkListener } from "./server-identity.ts";
import {
  candidatePorts,
  HOSTNAME,
  PORT_FIRST,
  PORT_LAST,
  portFree,
  preferredPort,
  urlOf,
} from "./server-ports.ts";

const START_ATTEMPTS = 3;

export interface StartSpec {
  binary: string;
  projectRoot: string;
  markers: Record<string, string>;
  env: NodeJS.ProcessEnv;
  /** How long a fresh server may take to answer its health check. */
  startTimeoutMs: number;
  files: ServerFiles;
  /** OPENCODE_CONFIG_CONTENT for the server (the user's own, with the warm-up provider added); unset: the user's. */
  configContent?: string;
}

/** The record of a server that answers, or why none does (the details end with the server log's last lines). */
export type StartOutcome = { kind: "started"; info: ServerInfo } | { kind: "failed"; details: string };

type Attempt =
  | { kind: "started"; info: ServerInfo }
  | { kind: "failed"; details: string; portTaken: boolean };

/** What became of a spawned child, filled in as it happens. */
interface ChildFate {
  /** `<message>` when it could not be run at all. */
  error?: string;
  /** `exited with code <n>` / `was killed by <signal>`. */
  exit?: string;
}

function watchChild(child: ChildProcess): ChildFate {
  const fate: ChildFate = {};
  child.on("error", (error) => {
    fate.error = error.message;
  });
  child.on("exit", (code, signal) => {
    fate.exit = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  });
  return fate;
}

export async function startServer(spec: StartSpec): Promise<StartOutcome> {
  await spec.files.ensureDir();
  await spec.files.rotateLog();
  const tried = new Set<number>();
  let lastFailure: string | undefined;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    let port: number | undefined;
    for (const candidate of candidatePorts(spec.projectRoot)) {
      if (tried.has(candidate)) continue;
      if (await portFree(candidate)) {
        port = candidate;
        break;
      }
      tried.add(candidate);
    }
    if (port === undefined) {
      return {
        kind: "failed",
        details: `no free port near ${preferredPort(spec.projectRoot)} in ${PORT_FIRST}-${PORT_LAST}`,
      };
    }
    tried.add(port);
    const outcome = await startOn(spec, port);
    if (outcome.kind === "started") return outcome;
    lastFailure = outcome.details;
    // Someone took the port between our probe and the server's bind: try the next one.
    if (!outcome.portTaken) break;
  }
  return { kind: "failed", details: lastFailure ?? "unknown failure" };
}

/** Poll a fresh server until it is healthy; what went wrong otherwise (the child is stopped on a timeout). */
async function awaitHealthy(
  spec: StartSpec,
  child: ChildProcess,
  fate: ChildFate,
  port: number,
  credentials: ServerCredentials,
): Promise<string | undefined> {
  const { binary, startTimeoutMs } = spec;
  const url = urlOf(port);
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (fate.error) return `cannot run ${binary}: ${fate.error}`;
    if (fate.exit) return `${binary} serve ${fate.exit} before it answered ${url}/global/health`;
    // Our own child, but the port may be someone else's until our child holds it: check before sending the password.
    if (
      child.pid !== undefined &&
      (await checkListener(child.pid, HOSTNAME, port)) === "ours" &&
      (await probeHealth(url, credentials)) === "healthy"
    ) {
      return undefined;
    }
    if (Date.now() >= deadline) {
      if (child.pid !== undefined) await terminateProcess(child.pid, 2_000);
      return `${binary} serve did not answer ${url}/global/health within ${startTimeoutMs} ms`;
    }
    await Bun.sleep(100);
  }
}

async function startOn(spec: StartSpec, port: number): Promise<Attempt> {
  const { binary, files } = spec;
  const url = urlOf(port);
  const fd = openSync(files.logPath, "a", 0o600);
  fchmodSync(fd, 0o600);
  writeSync(fd, `\n=== opencode-teams: ${binary} serve on ${url} at ${new Date().toISOString()} ===\n`);
  const markerEnd = (await stat(files.logPath)).size;
  const failed = async (why: string) => {
    const tail = await files.logTail(markerEnd);
    const portTaken = /EADDRINUSE|address already in use|port .* in use/i.test(tail);
    const details = `${why} (log: ${files.logPath})${tail ? `:\n${tail}` : ""}`;
    return { kind: "failed" as const, details, portTaken };
  };

  const { auth, credentials } = newServerAuth(spec.env);
  let child: ChildProcess;
  try {
    // Detached: the server is a session leader of its own and outlives the process that started it. The password
    // goes through its environment, never argv (which every user of the machine can read).
    child = spawn(
      binary,
      ["serve", "--hostname", HOSTNAME, "--port", String(port), "--print-logs", "--log-level", "INFO"],
      {
        cwd: spec.projectRoot,
        env: serverEnv(spec.env, auth, credentials, spec.markers, spec.configContent),
        stdio: ["ignore", fd, fd],
        detached: true,
      },
    );
  } catch (error) {
    closeSync(fd);
    return failed(`cannot run ${binary}: ${error instanceof Error ? error.message : String(error)}`);
  }
  closeSync(fd);
  const fate = watchChild(child);
  child.unref();
  const problem = await awaitHealthy(spec, child, fate, port, credentials);
  if (problem) return failed(problem);
  const info: ServerInfo = {
    version: 1,
    projectPath: spec.projectRoot,
    pid: child.pid as number,
    port,
    hostname: HOSTNAME,
    startedAt: new Date().toISOString(),
    activeSessions: 0,
    logPath: files.logPath,
    auth,
  };
  return { kind: "started", info };
}

import { randomBytes } from "node:crypto";
import type { ServerAuth, ServerInfo } from "../state/schemas.ts";
import { basicAuthHeaders, serverAuthFromEnv } from "./opencode-client.ts";

/**
 * The project server's credentials: where they come from, how they are recorded, and the health probe that carries
 * them (only ever to a listener already verified ours, see server-identity.ts).
 */

/** A fresh server can leave an early request unanswered, so every probe has its own short timeout. */
export const PROBE_TIMEOUT_MS = 500;

export type Health = "healthy" | "unauthorized" | "unhealthy";

/** Basic-auth credentials of a project server. */
export interface ServerCredentials {
  username: string;
  password: string;
}

/** Bytes of randomness in a generated server password (base64url: 43 characters). */
const PASSWORD_BYTES = 32;

/**
 * How a client gets into a recorded server: its generated password, else the user's OPENCODE_SERVER_PASSWORD (an
 * `environment` record, or a record from before servers had passwords); undefined when neither exists.
 */
export function recordedCredentials(
  info: ServerInfo,
  env: NodeJS.ProcessEnv = process.env,
): ServerCredentials | undefined {
  if (info.auth?.source === "generated")
    return { username: info.auth.username, password: info.auth.password };
  const { password, username } = serverAuthFromEnv(env);
  return password ? { username: username ?? "opencode", password } : undefined;
}

/** Only ever called on a listener verified to be our server (checkListener): the password goes nowhere else. */
export async function probeHealth(
  url: string,
  credentials: ServerCredentials | undefined,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<Health> {
  try {
    const response = await fetch(`${url}/global/health`, {
      headers: basicAuthHeaders(credentials ?? {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status === 401 || response.status === 403) return "unauthorized";
    if (!response.ok) return "unhealthy";
    const body = (await response.json()) as { healthy?: unknown };
    return body.healthy === true ? "healthy" : "unhealthy";
  } catch {
    return "unhealthy";
  }
}

export async function probeHealthRepeatedly(
  url: string,
  credentials: ServerCredentials | undefined,
  attempts: number,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<Health> {
  let last: Health = "unhealthy";
  for (let i = 0; i < attempts; i++) {
    last = await probeHealth(url, credentials, timeoutMs);
    if (last !== "unhealthy") return last;
    if (i + 1 < attempts) await Bun.sleep(150);
  }
  return last;
}

/**
 * Where the server's OPENCODE_SERVER_PASSWORD came from (`generated` or `environment`), in its own environment: a
 * plugin inside the server sees a generated password there and must not take it for the user's, and a server whose
 * record is lost tells whether its password may be written down again.
 */
export const AUTH_SOURCE_ENV = "OPENCODE_TEAMS_SERVER_AUTH";

/** The user's OPENCODE_SERVER_PASSWORD wins; otherwise a fresh random password for this server alone. */
export function newServerAuth(env: NodeJS.ProcessEnv): { auth: ServerAuth; credentials: ServerCredentials } {
  const { password, username } = serverAuthFromEnv(env);
  if (password && env[AUTH_SOURCE_ENV] !== "generated") {
    const user = username ?? "opencode";
    return { auth: { source: "environment", username: user }, credentials: { username: user, password } };
  }
  const generated = randomBytes(PASSWORD_BYTES).toString("base64url");
  return {
    auth: { source: "generated", username: "opencode", password: generated },
    credentials: { username: "opencode", password: generated },
  };
}

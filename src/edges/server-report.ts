// The project server as `opencode-teams server status` and get-agent-status report it: its state in one word, its
// record without the password, and a sentence saying what it means.
import type { ServerAuth, ServerInfo } from "../state/schemas.ts";
import type { Inspection } from "./server-inspection.ts";
import { urlOf } from "./server-ports.ts";

/** ServerInfo as it may leave the process: the password never does (specs/spawn-agent.md). */
export type PublicServerInfo = Omit<ServerInfo, "auth"> & {
  auth?: { source: ServerAuth["source"]; username: string };
};

function publicInfo(info: ServerInfo): PublicServerInfo {
  const { auth, ...rest } = info;
  return auth ? { ...rest, auth: { source: auth.source, username: auth.username } } : rest;
}

export type ServerState = "running" | "unresponsive" | "unauthorized" | "unprotected" | "stopped" | "none";

export interface ServerReport {
  state: ServerState;
  /** The recorded (or found) server, without its password; absent with state "none". */
  info?: PublicServerInfo;
  detail: string;
}

/** No server.json: our server found listening without one, or none at all. */
export function unrecordedReport(orphan: { pid: number; port: number } | undefined): ServerReport {
  return orphan
    ? {
        state: "unresponsive",
        detail: `no server.json, but our server pid ${orphan.pid} listens on ${urlOf(orphan.port)}; the next spawn-agent records it again`,
      }
    : {
        state: "none",
        detail: "no OpenCode server recorded for this project; the first spawn-agent starts one",
      };
}

/** The recorded server as its inspection found it. */
export function recordedReport(recorded: ServerInfo, seen: Inspection, logPath: string): ServerReport {
  const info = publicInfo(recorded);
  const where = `${urlOf(info.port)} (pid ${info.pid})`;
  switch (seen.kind) {
    case "healthy":
      return { state: "running", info, detail: `${where} is healthy` };
    case "unauthorized":
      return { state: "unauthorized", info, detail: `${where} refuses our credentials` };
    case "unresponsive":
      return {
        state: "unresponsive",
        info,
        detail: `${where} is alive but ${seen.why}; see ${logPath}`,
      };
    case "open":
      return {
        state: "unprotected",
        info,
        detail: `${where} runs without a password; the next spawn-agent replaces it`,
      };
    case "absent":
      return { state: "stopped", info, detail: `${where} is not running (${seen.check ?? "gone"})` };
  }
}

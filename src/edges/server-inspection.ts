// Whether a recorded server is this project's and answers: identity first (pid, command line, listening socket,
// markers: nothing is sent), then health with our credentials, and a signal only to a pid still proven ours.
import type { ServerInfo } from "../state/schemas.ts";
import { processRunning, terminateProcess } from "./process-info.ts";
import { PROBE_TIMEOUT_MS, probeHealthRepeatedly, recordedCredentials } from "./server-auth.ts";
import { carriesMarkers } from "./server-env.ts";
import { checkListener, type ListenerCheck, listeningSockets, processStartTicks } from "./server-identity.ts";
import { HOSTNAME, urlOf } from "./server-ports.ts";

/** A server that is alive but slow gets long probes: a busy 2-core machine can take seconds to answer. */
export const UNRESPONSIVE_PROBE_MS = 2_000;
/**
 * How long a healthy answer from a server verified ours is taken as still true by this process. A busy server (agents'
 * panes booting on a small machine) can take seconds to answer a health check that tells nothing new; identity (pid,
 * start time, listening sockets) is still checked on every call, so a server that died or let its port go is not
 * trusted, and one that hangs fails the spawn's own requests with their own errors.
 */
const HEALTH_TRUST_MS = 120_000;

/** What ServerInspector makes of a recorded server. */
export type Inspection =
  | { kind: "healthy"; info: ServerInfo }
  | { kind: "unauthorized"; info: ServerInfo }
  /** Ours and alive, but it does not answer (or does not listen yet): never replaced behind its back. */
  | { kind: "unresponsive"; info: ServerInfo; why: string }
  /** Ours, but started without a password (by an older version): an open door. */
  | { kind: "open"; info: ServerInfo }
  /** Nothing of ours there: no record, the process is gone, or the pid or port belongs to someone else. */
  | { kind: "absent"; check?: ServerCheck };

/**
 * checkListener's answer, plus "other-project": our serve command and socket, but not this project's markers (another
 * project's server on a recorded pid or port after a reboot, or one started by hand or by an older version). Such a
 * server is never sent our password nor signalled; it is left running and ours is started on another port.
 */
export type ServerCheck = ListenerCheck | "other-project";

export class ServerInspector {
  /**
   * pid, port, start time and listening sockets of the last server that passed checkListener: current() is called on
   * every sweep.
   */
  private verifiedKey: string | undefined;
  /** verifiedKey and credentials of the server that last answered healthy here, and when. */
  private healthy: { key: string; at: number } | undefined;

  constructor(
    private readonly markers: Record<string, string>,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  /** checkListener, and then this project's markers in the process's environment: nothing is sent, nothing signalled. */
  async verify(info: ServerInfo): Promise<ServerCheck> {
    // The listening sockets are part of the key: a server of ours that let its port go must not vouch for whoever
    // took the port next. /proc/net/tcp is one read; the full check walks every fd of the process.
    const [ticks, listeners] = await Promise.all([processStartTicks(info.pid), listeningSockets()]);
    const sockets = (listeners?.get(info.port) ?? []).sort().join(",");
    const key = `${info.pid}:${info.port}:${ticks}:${sockets}`;
    if (ticks !== undefined && key === this.verifiedKey && processRunning(info.pid)) return "ours";
    let check: ServerCheck = await checkListener(info.pid, HOSTNAME, info.port);
    if ((check === "ours" || check === "not-listening") && !(await carriesMarkers(info.pid, this.markers))) {
      check = "other-project";
    }
    this.verifiedKey = check === "ours" && ticks !== undefined ? key : undefined;
    return check;
  }

  /**
   * SIGTERM then SIGKILL to a server verified ours, asking again right before each signal that the pid is still the
   * same process (its start time) with this project's markers: a pid that changed hands meanwhile is never signalled.
   */
  async terminate(pid: number): Promise<boolean> {
    const ticks = await processStartTicks(pid);
    return terminateProcess(
      pid,
      5_000,
      async () => (await processStartTicks(pid)) === ticks && (await carriesMarkers(pid, this.markers)),
    );
  }

  /**
   * Identity first (pid, command line, listening socket: nothing is sent), then health with our credentials. The
   * host is always 127.0.0.1, whatever the file says.
   */
  async inspect(
    info: ServerInfo | undefined,
    attempts: number,
    timeoutMs = PROBE_TIMEOUT_MS,
  ): Promise<Inspection> {
    if (!info) return { kind: "absent" };
    const check = await this.verify(info);
    if (check === "not-listening") {
      return { kind: "unresponsive", info, why: `it does not listen on port ${info.port}` };
    }
    if (check !== "ours") return { kind: "absent", check };
    const credentials = recordedCredentials(info, this.env);
    // Protected by the user's password, which this process was not given: as good as a wrong one.
    if (!credentials) return info.auth ? { kind: "unauthorized", info } : { kind: "open", info };
    const trustKey =
      this.verifiedKey && `${this.verifiedKey} ${credentials.username}:${credentials.password}`;
    // A monotonic clock: a wall clock stepped back would stretch the trust.
    if (trustKey && this.healthy?.key === trustKey && performance.now() - this.healthy.at < HEALTH_TRUST_MS) {
      return { kind: "healthy", info };
    }
    const health = await probeHealthRepeatedly(urlOf(info.port), credentials, attempts, timeoutMs);
    this.healthy = health === "healthy" && trustKey ? { key: trustKey, at: performance.now() } : undefined;
    if (health === "healthy") return { kind: "healthy", info };
    if (health === "unauthorized") return { kind: "unauthorized", info };
    return { kind: "unresponsive", info, why: "its health check does not answer" };
  }

  /**
   * A request to the server failed: the next inspect probes its health again instead of trusting the last answer, so
   * a server that hangs meets the "unresponsive" path rather than another timed-out request.
   */
  forgetHealthy(): void {
    this.healthy = undefined;
  }
}

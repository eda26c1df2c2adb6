// Where a project's `opencode serve` listens: 127.0.0.1, on a port picked from the project's path.
import net from "node:net";
import { projectHash } from "../state/paths.ts";

export const PORT_FIRST = 28_000;
export const PORT_LAST = 28_999;
export const HOSTNAME = "127.0.0.1";

/** The port a project tries first: stable for a path, so a restarted server is found where it was. */
export function preferredPort(projectRoot: string): number {
  const span = PORT_LAST - PORT_FIRST + 1;
  return PORT_FIRST + (Number.parseInt(projectHash(projectRoot).slice(0, 8), 16) % span);
}

/** Ports to try, starting at the preferred one and wrapping around inside the range. */
export function candidatePorts(projectRoot: string, count = 40): number[] {
  const span = PORT_LAST - PORT_FIRST + 1;
  const first = preferredPort(projectRoot) - PORT_FIRST;
  return Array.from({ length: Math.min(count, span) }, (_, i) => PORT_FIRST + ((first + i) % span));
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host: HOSTNAME, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

export function urlOf(port: number): string {
  return `http://${HOSTNAME}:${port}`;
}

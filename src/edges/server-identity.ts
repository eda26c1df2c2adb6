import { readFileSync } from "node:fs";
import { readdir, readFile, readlink } from "node:fs/promises";
import { allPids, processCommandLine, processRunning, statFields } from "./process-info.ts";

/**
 * Who really serves a port on this machine, read from /proc (Linux): the listening sockets of the port in
 * /proc/net/tcp{,6}, the processes holding those sockets in /proc/<pid>/fd, and what those processes run. Nothing here
 * sends a byte to the port, so a credential is only ever sent once the listener is known to be ours.
 */

/**
 * Our server binds exactly 127.0.0.1 (/proc/net/tcp spells it 0100007F), and a connection to 127.0.0.1 lands on that
 * socket first. Listeners on other addresses of the port (`::1`, `::`, `0.0.0.0`: any local user can bind them) do
 * not receive our connections, so they neither prove nor disprove a server ours.
 */
const OUR_ADDRESS = "0100007F";
const TCP_LISTEN = "0A";

/**
 * Inodes of the sockets listening on 127.0.0.1, by port; undefined without /proc. Read with a blocking call: the
 * kernel's walk of its socket table costs the same either way (4.5 ms here), and a read through the thread pool then
 * waited for a busy leader process's event loop, 5-18 ms on a spawn's way to its prompt (every spawn checks its server).
 */
export async function listeningSockets(): Promise<Map<number, string[]> | undefined> {
  const byPort = new Map<number, string[]>();
  let text: string;
  try {
    text = readFileSync("/proc/net/tcp", "utf8");
  } catch {
    return undefined;
  }
  for (const line of text.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [address, hexPort] = (fields[1] ?? "").split(":");
    const inode = fields[9];
    if (fields[3] !== TCP_LISTEN || address !== OUR_ADDRESS || !inode || inode === "0") continue;
    const port = Number.parseInt(hexPort ?? "", 16);
    byPort.set(port, [...(byPort.get(port) ?? []), inode]);
  }
  return byPort;
}

/** The socket inodes a process holds open (empty when its fds cannot be read: not ours, or gone). */
async function socketInodesOf(pid: number): Promise<Set<string>> {
  const out = new Set<string>();
  let fds: string[];
  try {
    fds = await readdir(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  await Promise.all(
    fds.map(async (fd) => {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
      const match = /^socket:\[(\d+)\]$/.exec(target);
      if (match?.[1]) out.add(match[1]);
    }),
  );
  return out;
}

/** Processes (readable by us) that hold one of these socket inodes. */
export async function socketOwners(inodes: readonly string[]): Promise<number[]> {
  if (inodes.length === 0) return [];
  const wanted = new Set(inodes);
  const pids = await allPids();
  const held = await Promise.all(pids.map(socketInodesOf));
  return pids
    .filter((_, index) => [...(held[index] ?? [])].some((inode) => wanted.has(inode)))
    .sort((a, b) => a - b);
}

/** argv of `opencode serve` as ServerManager starts it on this port (the binary may be a wrapper script). */
export function isServeCommand(argv: readonly string[], hostname: string, port: number): boolean {
  const after = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const serve = argv.indexOf("serve");
  return (
    serve >= 1 &&
    argv.slice(0, serve).some((part) => part.includes("opencode")) &&
    after("--hostname") === hostname &&
    after("--port") === String(port)
  );
}

export type ListenerCheck =
  /** The pid runs our serve command and holds every socket listening on 127.0.0.1 at the port. */
  | "ours"
  /** No such process (or a zombie). */
  | "gone"
  /** The pid runs something else: a reused pid. */
  | "other-process"
  /** The pid runs our serve command but nothing listens on 127.0.0.1 at the port (starting, stopping or stuck). */
  | "not-listening"
  /** Something other than the pid listens on 127.0.0.1 at the port (alone or beside it): an impostor or a stale record. */
  | "other-listener";

/**
 * Whether `pid` is our `opencode serve` and the only thing listening on 127.0.0.1 at `port`. Without /proc (not Linux)
 * the listener cannot be checked and the command line has to do.
 */
export async function checkListener(pid: number, hostname: string, port: number): Promise<ListenerCheck> {
  if (!processRunning(pid)) return "gone";
  const argv = await processCommandLine(pid);
  if (!argv || !isServeCommand(argv, hostname, port)) return "other-process";
  const listeners = await listeningSockets();
  if (listeners === undefined) return "ours";
  const inodes = listeners.get(port) ?? [];
  if (inodes.length === 0) return "not-listening";
  const held = await socketInodesOf(pid);
  return inodes.every((inode) => held.has(inode)) ? "ours" : "other-listener";
}

/** A process's environment (same user only), or undefined when it cannot be read. */
export async function processEnvironment(pid: number): Promise<Record<string, string> | undefined> {
  try {
    const raw = await readFile(`/proc/${pid}/environ`, "utf8");
    const env: Record<string, string> = {};
    for (const entry of raw.split("\u0000")) {
      const eq = entry.indexOf("=");
      if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
    }
    return env;
  } catch {
    return undefined;
  }
}

/** When the process started (clock ticks since boot): with the pid, it names one process for good. */
export async function processStartTicks(pid: number): Promise<string | undefined> {
  return (await statFields(pid))?.[19];
}

import { readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { hostname } from "node:os";
import type { ProcessApi } from "./host-process-api.ts";
import { pidAlive } from "./process.ts";

/** argv of a running process, or undefined when it is gone or cannot be read. Linux reads /proc; elsewhere `ps`. */
export async function processCommandLine(pid: number): Promise<string[] | undefined> {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, "utf8");
    const argv = raw.split("\u0000").filter((part) => part !== "");
    return argv.length > 0 ? argv : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && process.platform === "linux") return undefined;
  }
  try {
    const child = Bun.spawn(["ps", "-o", "command=", "-p", String(pid)], {
      stdout: "pipe",
      stderr: "ignore",
    });
    const text = (await new Response(child.stdout).text()).trim();
    return (await child.exited) === 0 && text !== "" ? text.split(/\s+/) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The fields of /proc/<pid>/stat after the command name, which is parenthesised and may contain spaces: [0] state,
 * [1] parent pid, [19] start time. Undefined without /proc or once the process is gone.
 */
export async function statFields(pid: number): Promise<string[] | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** Every pid /proc shows ([] without /proc). */
export async function allPids(): Promise<number[]> {
  try {
    return (await readdir("/proc")).filter((entry) => /^\d+$/.test(entry)).map(Number);
  } catch {
    return [];
  }
}

/** The parent pid of a running process (Linux only); undefined when it is gone or cannot be read. */
export async function parentPid(pid: number): Promise<number | undefined> {
  const parent = Number((await statFields(pid))?.[1]);
  return Number.isInteger(parent) ? parent : undefined;
}

/** Direct children of `pid` (Linux only; [] elsewhere): what an attach process may have started. */
export async function childPids(pid: number): Promise<number[]> {
  const pids = await allPids();
  const parents = await Promise.all(pids.map(parentPid));
  return pids.filter((_, index) => parents[index] === pid);
}

/** Alive and not a zombie: a killed child of a parent that has not reaped it yet is gone for our purposes. */
export function processRunning(pid: number): boolean {
  if (!pidAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    // No /proc (not Linux) or it exited meanwhile: trust the signal probe.
    return pidAlive(pid);
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (processRunning(pid)) {
    if (Date.now() >= deadline) return false;
    await Bun.sleep(50);
  }
  return true;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * SIGTERM, then SIGKILL after `graceMs`; true once the process is gone. `isOurs`, when given, is asked right before
 * each signal, as the pid may have passed to another process meanwhile: once it says no, nothing more is sent and the
 * result is false.
 */
export async function terminateProcess(
  pid: number,
  graceMs = 1_000,
  isOurs: () => Promise<boolean> = async () => true,
): Promise<boolean> {
  if (!processRunning(pid)) return true;
  if (!(await isOurs())) return false;
  signal(pid, "SIGTERM");
  if (await waitGone(pid, graceMs)) return true;
  if (!(await isOurs())) return false;
  signal(pid, "SIGKILL");
  return waitGone(pid, 2_000);
}

/** Wait up to `ms` for a process to exit by itself. */
export function waitForExit(pid: number, ms: number): Promise<boolean> {
  return waitGone(pid, ms);
}

/** This host's processes, for the context (operations reach processes only through it). */
export const hostProcesses: ProcessApi = {
  self: { pid: process.pid, host: hostname() },
  commandLine: processCommandLine,
  parent: parentPid,
  children: childPids,
  running: processRunning,
  terminate: terminateProcess,
  waitForExit,
};

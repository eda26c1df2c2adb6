/**
 * What a bench run started, and the one cleanup that stops all of it: at the end of the run, after a figure group
 * (a group that failed half-way may leave its servers up), on SIGINT, SIGTERM and SIGHUP (the terminal closed), on an
 * uncaught error, and on exit.
 *
 * The registry is the run's mark: `startRun` puts `OCT_BENCH_RUN=<id>` into the environment, and every process the run
 * starts inherits it, down to those it never sees start (the project server the plugin starts from inside a leader's
 * `opencode serve`, the tmux servers and their panes' `opencode attach`, the harness's reaper shells). A process is
 * the run's when its environment carries the mark; its start time, read with it, tells it from a later process that
 * got the same PID, and is checked again right before each signal. The run's temporary projects all live under one
 * private TMPDIR, removed whole, and its tmux servers are on sockets it named (`benchSocket`), each stopped by
 * `kill-server` (which closes its panes) and its socket file removed.
 */

import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { tmux } from "../tests/e2e/harness/index.ts";
import { removeSocketFile } from "../tests/e2e/tmux-socket-file.ts";

const RUN_MARK = "OCT_BENCH_RUN";
/** How long the run's processes get to exit on SIGTERM before SIGKILL. */
const TERM_GRACE_MS = 3_000;
/** Between groups, how long a process of the run gets to end by itself before it counts as left behind. */
const SELF_EXIT_MS = 1_500;
/** Passes over /proc: a process being forked while the previous pass killed its parent shows up in the next. */
const SWEEP_PASSES = 5;

interface Run {
  id: string;
  /** The TMPDIR every temporary project of the run is made in. */
  tmpRoot: string;
  sockets: Set<string>;
}

/** A process of the run, as found: its PID and its start time (clock ticks since boot), which a reused PID lacks. */
interface Found {
  pid: number;
  started: string;
  command: string;
}

let run: Run | undefined;

/** The start time field of /proc/<pid>/stat, or undefined when the process is gone. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    // Fields after the command (which may hold spaces and parentheses); the start time is field 22.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** The run's processes still running (a zombie's environment reads empty, so the dead are not found). */
function runProcesses(id: string): Found[] {
  const mark = `${RUN_MARK}=${id}`;
  const found: Found[] = [];
  // Without /proc (not Linux) no process is found by its environment; tmux servers and projects are still cleaned.
  const entries = existsSync("/proc") ? readdirSync("/proc") : [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const pid = Number(entry);
    try {
      const started = startTime(pid);
      if (!readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(mark)) continue;
      if (started === undefined || startTime(pid) !== started) continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ").trim();
      found.push({ pid, started, command });
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}

/** Signal `p` if it is still the process found (same PID, same start time); true when it was. */
function signalIfSame(p: Found, signal: NodeJS.Signals): boolean {
  if (startTime(p.pid) !== p.started) return false;
  try {
    process.kill(p.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Begin a run: mark the environment, move TMPDIR into a private directory and install the cleanup on SIGINT, SIGTERM,
 * an uncaught error and exit. Call it before anything is started.
 */
export function startRun(): void {
  if (run) return;
  const tmpRoot = mkdtempSync(path.join(os.tmpdir(), "oct-bench-"));
  run = { id: `${process.pid}-${randomBytes(4).toString("hex")}`, tmpRoot, sockets: new Set() };
  process.env[RUN_MARK] = run.id;
  process.env.TMPDIR = tmpRoot;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => onSignal(signal));
  for (const event of ["uncaughtException", "unhandledRejection"] as const)
    process.on(event, (error: unknown) => {
      process.stderr.write(
        `bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      void stopAndExit(1);
    });
  // The last resort, synchronous: whatever path leads to exit, nothing of the run outlives it.
  process.on("exit", () => stopNow());
}

/** A private tmux socket name for a figure, stopped and removed by the cleanup whatever happens to the figure. */
export function benchSocket(): string {
  const socket = tmux.tmuxSocketName("otbench");
  run?.sockets.add(socket);
  return socket;
}

/** Stop the run's tmux servers (their panes close with them) and remove their socket files. */
function stopTmux(current: Run): void {
  for (const socket of current.sockets) {
    tmux.killServer(socket);
    removeSocketFile(socket);
  }
}

/** What a cleanup found still running, for the progress line. */
export interface Stopped {
  processes: string[];
}

let exiting: Promise<Stopped> | undefined;
/** Set by a second signal during the cleanup: no more grace, SIGKILL at once. */
let urgent = false;

/** Wait while any of `found` is still that process, at most `ms` (cut short by a second signal). */
async function whileRunning(found: readonly Found[], ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!urgent && performance.now() < deadline && found.some((p) => startTime(p.pid) === p.started))
    await Bun.sleep(50);
}

/**
 * Stop everything of the run still running: tmux servers first (their panes' `opencode attach` go with them), then
 * every marked process, SIGTERM and after TERM_GRACE_MS (or at once after a second signal) SIGKILL, then again until a
 * pass finds none. Between groups the temporary projects stay (they are the groups' own to remove), and a
 * process gets a second to end by itself first (a stopped server's reaper shell is still in its last `sleep 1`):
 * only what outlives that is reported as left behind.
 */
export async function stopAll(when: "between groups" | "at the end"): Promise<Stopped> {
  const between = when === "between groups";
  const current = run;
  if (!current) return { processes: [] };
  stopTmux(current);
  if (between) await whileRunning(runProcesses(current.id), SELF_EXIT_MS);
  const found = runProcesses(current.id);
  for (const p of found) signalIfSame(p, "SIGTERM");
  await whileRunning(found, TERM_GRACE_MS);
  killRemaining(current);
  if (!between) rmSync(current.tmpRoot, { recursive: true, force: true });
  return { processes: found.map((p) => `${p.pid} ${p.command.slice(0, 80)}`) };
}

/** SIGKILL every marked process, pass after pass until none is left. */
function killRemaining(current: Run): void {
  for (let pass = 0; pass < SWEEP_PASSES; pass++) {
    const left = runProcesses(current.id);
    if (left.length === 0) return;
    for (const p of left) signalIfSame(p, "SIGKILL");
    Bun.sleepSync(20);
  }
}

/** The exit hook's cleanup: no waiting, SIGKILL, and the temporary projects removed. */
function stopNow(): void {
  const current = run;
  if (!current) return;
  stopTmux(current);
  killRemaining(current);
  rmSync(current.tmpRoot, { recursive: true, force: true });
}

/** Whether a signal or an uncaught error is stopping the run: no new group should start. */
export function stopping(): boolean {
  return exiting !== undefined;
}

/** Clean up once (a second call joins the first) and exit with `code`. */
function stopAndExit(code: number): Promise<void> {
  exiting ??= stopAll("at the end");
  return exiting.then(
    () => process.exit(code),
    () => process.exit(code),
  );
}

/** 128 + the signal's number, as a shell reports a process the signal ended. */
const SIGNAL_CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;

function onSignal(signal: keyof typeof SIGNAL_CODES): void {
  if (exiting) {
    urgent = true;
    process.stderr.write(`\n${signal} again: killing what is left at once\n`);
    return;
  }
  process.stderr.write(`\n${signal}: stopping every process and server the bench started…\n`);
  void stopAndExit(SIGNAL_CODES[signal]);
}

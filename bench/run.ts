/**
 * `npm run bench`: times every figure beside its floor on this machine, prints the machine, the table and the figures'
 * notes, and writes bench/results/latest.json (gitignored). The short run by default; `--full` is the long paired run,
 * the only one that rewrites the table between the bench markers of README.md. `--help` says more (cli.ts); the method
 * is in bench/README.md.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import writeFileAtomic from "write-file-atomic";
import { startRun, stopAll, stopping } from "./cleanup.ts";
import { parseArgs, usage } from "./cli.ts";
import { benchCold } from "./fig-cold.ts";
import { benchConcurrent } from "./fig-concurrent.ts";
import { benchDetectDefault } from "./fig-detect.ts";
import { benchHeartbeat } from "./fig-heartbeat.ts";
import { benchInbox } from "./fig-inbox.ts";
import { benchMessages } from "./fig-messages.ts";
import { benchMonitor } from "./fig-monitor.ts";
import { benchPermissionNotice } from "./fig-permission.ts";
import { benchReal } from "./fig-real.ts";
import { benchStatus } from "./fig-status.ts";
import { benchSweep } from "./fig-sweep.ts";
import { benchTasks } from "./fig-tasks.ts";
import { benchUsage } from "./fig-usage.ts";
import { benchWorktree } from "./fig-worktree.ts";
import { appendRun, earlierRatios } from "./history.ts";
import { machineInfo } from "./machine.ts";
import { lastProbe, settleFiles, settleLoad, type Waits } from "./settle.ts";
import { lastNote } from "./setup.ts";
import { type Figure, withLoad } from "./stats.ts";
import { markdownTable, WIDTH, wrap } from "./table.ts";

const REPO_ROOT = path.resolve(import.meta.dir, "..");
const START = "<!-- bench:start -->";
const END = "<!-- bench:end -->";

/** The short run's waits keep it within minutes; the full run's give each group a settled machine (settle.ts). */
const SHORT_WAITS: Waits = {
  loadMaxMs: 20_000,
  loadUntilFlat: true,
  filesMaxMs: 10_000,
  filesEveryMs: 1_000,
  firstWatchMs: 0,
};
const FULL_WAITS: Waits = {
  loadMaxMs: 150_000,
  loadUntilFlat: false,
  filesMaxMs: 120_000,
  filesEveryMs: 5_000,
  firstWatchMs: 30_000,
};
/** --no-wait: one probe of the disk, for the table's column, and no waiting. */
const NO_WAITS: Waits = {
  loadMaxMs: 0,
  loadUntilFlat: true,
  filesMaxMs: 0,
  filesEveryMs: 0,
  firstWatchMs: 0,
};
/** A wait or a group running longer than this gets a progress line, and another every PROGRESS_EVERY_MS. */
const PROGRESS_FIRST_MS = 5_000;
const PROGRESS_EVERY_MS = 15_000;

interface Group {
  id: string;
  /** For the usage text. */
  what: string;
  /**
   * How many processes the group keeps busy at once, which the load after it counts too: the bench alone, the four
   * writers and the reader of figure 4, and for 6 the leader's and the project's `opencode serve`, the bench and a
   * booting `opencode attach` (an estimate: the panes' idle drawing comes on top). Figure 3 counts two: its fsyncs
   * keep the runtime's I/O threads in uninterruptible sleep, which Linux counts in the load average as well (on an
   * idle machine the load went from 0.51 to 1.64 over figure 3 alone).
   */
  own: number;
  /** `short`: the short run's sizes (fewer rounds, no spreading out in time). */
  run: (short: boolean) => Promise<Figure[]>;
}

/** Every figure group, in the order run; a new figure file adds one line here. */
const GROUPS: Group[] = [
  { id: "1", what: "heartbeat", own: 1, run: benchHeartbeat },
  { id: "2", what: "status", own: 1, run: benchStatus },
  { id: "3", what: "sweeps", own: 2, run: benchSweep },
  { id: "4", what: "concurrent heartbeats", own: 5, run: benchConcurrent },
  { id: "5", what: "event monitor", own: 1, run: benchMonitor },
  // 6 and 7b share one real server.
  { id: "6", what: "spawn and death, real opencode + tmux", own: 4, run: benchReal },
  { id: "7", what: "death detection, default timings", own: 1, run: benchDetectDefault },
  { id: "8", what: "messages, real opencode", own: 1, run: benchMessages },
  { id: "9", what: "worktrees", own: 1, run: benchWorktree },
  { id: "10", what: "permission notice", own: 1, run: benchPermissionNotice },
  { id: "11", what: "task board: claim and list", own: 1, run: benchTasks },
  { id: "12", what: "inboxes with 10,000 old messages", own: 1, run: benchInbox },
  // The leader's and the project's `opencode serve` (booting), the bench.
  { id: "13", what: "cold start: spawn to the first model request", own: 3, run: benchCold },
  { id: "14", what: "status and listings of 100 agents with usage", own: 1, run: benchUsage },
];

function say(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** Run `work`, saying `line(seconds so far)` if it lasts, and again every PROGRESS_EVERY_MS. */
async function withProgress<T>(work: () => Promise<T>, line: (seconds: number) => string): Promise<T> {
  const started = performance.now();
  const tell = () => say(`  ${line(Math.round((performance.now() - started) / 1000))}`);
  let interval: ReturnType<typeof setInterval> | undefined;
  const first = setTimeout(() => {
    tell();
    interval = setInterval(tell, PROGRESS_EVERY_MS);
  }, PROGRESS_FIRST_MS);
  try {
    return await work();
  } finally {
    clearTimeout(first);
    clearInterval(interval);
  }
}

/** Wait for the load and then the disk to settle before a group; the disk's cost and how long each wait took. */
async function settle(cores: number, waits: Waits) {
  const loadStarted = performance.now();
  const load = await withProgress(
    () => settleLoad(cores, waits.loadMaxMs, waits.loadUntilFlat),
    (s) =>
      `waiting for the 1-minute load (${(os.loadavg()[0] ?? 0).toFixed(2)}) to fall to ${cores} (the cores): ${s} s so far, at most ${waits.loadMaxMs / 1000} s`,
  );
  const loadWaitS = (performance.now() - loadStarted) / 1000;
  const filesStarted = performance.now();
  const fileCreateUs = await withProgress(
    () => settleFiles(waits),
    (s) =>
      `waiting for the disk to settle (a file create + unlink ${lastProbe.costUs.toFixed(0)} us, settled at ${lastProbe.limitUs.toFixed(0)} us): ${s} s so far, at most ${waits.filesMaxMs / 1000} s`,
  );
  return { load, loadWaitS, fileCreateUs, filesWaitS: (performance.now() - filesStarted) / 1000 };
}

/** Why the load wait ended, when it did not settle: a busy machine is the reader's to know. */
const LOAD_WAIT_END = {
  settled: "",
  "not falling": ", not falling: other programs' load",
  "timed out": ", still falling",
  "not waited": "",
} as const;

/** The group's last step done, if it noted one since `since`: what it went on to after it. */
function sinceNote(since: number): string {
  if (lastNote.at < since) return "";
  return `; last step done ${((performance.now() - lastNote.at) / 1000).toFixed(0)} s ago: ${lastNote.text.slice(0, 60)}`;
}

/** Replace what is between the markers; without markers, add them under a "## Performance" heading at the end. */
function withBenchSection(readme: string, body: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start >= 0 && end > start)
    return `${readme.slice(0, start + START.length)}\n${body}\n${readme.slice(end)}`;
  return `${readme.trimEnd()}\n\n## Performance\n\n${START}\n${body}\n${END}\n`;
}

const parsed = parseArgs(
  process.argv.slice(2),
  GROUPS.map((g) => g.id),
);
if (parsed.kind === "help") {
  process.stdout.write(`${usage(GROUPS)}\n`);
  process.exit(0);
}
if (parsed.kind === "error") {
  process.stderr.write(`bench: ${parsed.message}\n\n${usage(GROUPS)}\n`);
  process.exit(2);
}
const { full, noWait, only } = parsed.args;
startRun();
const waits = noWait ? NO_WAITS : full ? FULL_WAITS : SHORT_WAITS;
const machine = machineInfo(REPO_ROOT);
const started = performance.now();
say(
  `machine: ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB, ${machine.platform}; node ${machine.node}, bun ${machine.bun}, opencode ${machine.opencode}`,
);
say(full ? "the full run: about 30 minutes on a quiet machine" : "the short run (--full for the long one)");
const figures: Figure[] = [];
/** Where each group's time went: waiting for the machine, and its own work. */
const times: { id: string; loadWaitS: number; filesWaitS: number; runS: number }[] = [];
const failed: string[] = [];
for (const group of GROUPS) {
  if (only && !only.has(group.id)) continue;
  if (stopping()) break;
  const { load: loadEnd, loadWaitS, fileCreateUs, filesWaitS } = await settle(machine.cores, waits);
  const before = os.loadavg()[0] ?? 0;
  say(
    `figure ${group.id}, ${group.what}… (load ${before.toFixed(2)} after ${loadWaitS.toFixed(0)} s${LOAD_WAIT_END[loadEnd]}, file create ${fileCreateUs.toFixed(0)} us after ${filesWaitS.toFixed(0)} s)`,
  );
  const runStarted = performance.now();
  try {
    const measured = await withProgress(
      () => group.run(!full),
      (s) => `figure ${group.id} (${group.what}) still running: ${s} s so far${sinceNote(runStarted)}`,
    );
    const load = { before, after: os.loadavg()[0] ?? 0 };
    figures.push(...withLoad(measured, load, group.own, machine.cores).map((f) => ({ ...f, fileCreateUs })));
  } catch (error) {
    // The other groups' figures are still worth printing; the run as a whole is not complete.
    failed.push(group.id);
    say(
      `figure ${group.id} failed: ${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : JSON.stringify(error)}`,
    );
  }
  const runS = (performance.now() - runStarted) / 1000;
  times.push({ id: group.id, loadWaitS, filesWaitS, runS });
  say(`  figure ${group.id}: ${runS.toFixed(0)} s`);
  // A group that failed half-way may have left servers up; the next group must not run beside them.
  const left = await stopAll("between groups");
  if (left.processes.length > 0)
    say(
      `  figure ${group.id} left ${left.processes.length} process(es) running, stopped: ${left.processes.join("; ")}`,
    );
}
const totalS = (performance.now() - started) / 1000;
const resultsDir = path.join(REPO_ROOT, "bench", "results");
await mkdir(resultsDir, { recursive: true });
const historyFile = path.join(resultsDir, "history.jsonl");
const mode = `${full ? "full" : "short"}${noWait ? " --no-wait" : ""}`;
const earlier = await earlierRatios(historyFile, mode);
const table = markdownTable(figures.map((f) => ({ ...f, earlier: earlier.get(f.id) ?? [] })));
const machineLine = `${machine.date.slice(0, 10)}, ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB RAM, ${machine.platform}; Node ${machine.node}, Bun ${machine.bun}, OpenCode ${machine.opencode}; ${full ? "--full" : "short run"}${noWait ? "; --no-wait" : ""}${only ? `; only ${[...only].join(",")}` : ""}`;
const measuredLine = wrap(`Measured ${machineLine} (${totalS.toFixed(0)} s).`, WIDTH).join("\n");
process.stdout.write(
  `\n${measuredLine}\n\n${table}\n\n(${totalS.toFixed(0)} s)${failed.length > 0 ? `; failed: ${failed.join(",")}` : ""}\n`,
);

await appendRun(historyFile, mode, machine.date, figures);
await writeFile(
  path.join(resultsDir, "latest.json"),
  `${JSON.stringify({ machine, full, only: only ? [...only] : null, durationS: totalS, times, failed, figures }, null, 2)}\n`,
);
// Only a complete full run speaks for the project.
if (failed.length > 0) process.exitCode = 1;
else if (full && !only && !noWait) {
  const readmePath = path.join(REPO_ROOT, "README.md");
  const readme = await readFile(readmePath, "utf8").catch(() => "");
  // Atomically: a Ctrl-C while it is written must not leave half a README.
  await writeFileAtomic(readmePath, withBenchSection(readme, `${measuredLine}\n\n${table}`));
  say("README.md: bench table updated");
}
await stopAll("at the end");

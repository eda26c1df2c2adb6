/**
 * `npm run bench`: measures every figure beside its floor on this machine, prints the machine and a table, writes
 * bench/results/latest.json (gitignored) and rewrites the table between the bench markers of README.md.
 * Options: `--quick` (fewer runs, for iteration; the README is left alone), `--only 1,3` (those figures only).
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { benchConcurrent } from "./fig-concurrent.ts";
import { benchDetectDefault } from "./fig-detect.ts";
import { benchHeartbeat } from "./fig-heartbeat.ts";
import { benchMonitor } from "./fig-monitor.ts";
import { benchPermissionNotice } from "./fig-permission.ts";
import { benchReal } from "./fig-real.ts";
import { benchStatus } from "./fig-status.ts";
import { benchSweep } from "./fig-sweep.ts";
import { benchWorktree } from "./fig-worktree.ts";
import { machineInfo } from "./machine.ts";
import { settleFiles, settleLoad } from "./settle.ts";
import { timed } from "./setup.ts";
import { type Figure, markdownTable, withLoad } from "./stats.ts";

const REPO_ROOT = path.resolve(import.meta.dir, "..");
const START = "<!-- bench:start -->";
const END = "<!-- bench:end -->";

/** What the README says above the table. */
const LEGEND = [
  "Each figure is timed beside its floor, the least work any implementation must do for it, measured in the same run",
  "by turns with the figure's own rounds (6a and 7b: each round at the same moment as its floor's); the ratio (figure /",
  "floor, or floor / figure for rates) is what carries from",
  "machine to machine, the absolute medians only describe this one. Where the floor column says so, the ratio is the",
  "median of the ratios of rounds timed back to back (the disk and CPU of a shared machine have slow spells of a",
  'fraction of a second to seconds, which a pair meets together). "met" judges the ratio (counts and simulated time',
  "against their absolute targets); a figure whose 1-minute load average was above the core count before it, or",
  'after it by more than its own processes account for, is "noisy" and not judged. Before each figure the bench waits',
  "up to 150 s for the load the previous one left to fall back to the core count, then up to 120 s for a file's",
  "create + unlink to cost at most twice what it cost at the run's quietest (file create): after many files are",
  "removed, creating one costs up to several times more for a while on some disks, and every lock and atomic write",
  "creates one.",
].join(" ");

/**
 * `own`: how many processes a group keeps busy at once, which the load after it counts too: the bench alone, the four
 * writers and the reader of figure 4, and for 6 the leader's and the project's `opencode serve`, the bench and a
 * booting `opencode attach` (an estimate: the panes' idle drawing comes on top). Figure 3 counts two: its fsyncs keep
 * the runtime's I/O threads in uninterruptible sleep, which Linux counts in the load average as well (on an idle
 * machine the load went from 0.51 to 1.64 over figure 3 alone).
 */
const GROUPS: { id: string; own: number; run: (quick: boolean) => Promise<Figure[]> }[] = [
  { id: "1", own: 1, run: benchHeartbeat },
  { id: "2", own: 1, run: benchStatus },
  { id: "3", own: 2, run: benchSweep },
  { id: "4", own: 5, run: benchConcurrent },
  { id: "5", own: 1, run: benchMonitor },
  // 6 and 7b share one real server.
  { id: "6", own: 4, run: benchReal },
  { id: "7", own: 1, run: benchDetectDefault },
  { id: "8", own: 1, run: (quick) => import("./fig-messages.ts").then((m) => m.benchMessages(quick)) },
  { id: "9", own: 1, run: benchWorktree },
  { id: "10", own: 1, run: benchPermissionNotice },
  { id: "11", own: 1, run: (quick) => import("./fig-tasks.ts").then((m) => m.benchTasks(quick)) },
  { id: "12", own: 1, run: (quick) => import("./fig-usage.ts").then((m) => m.benchUsage(quick)) },
];

function parseArgs(argv: readonly string[]): { quick: boolean; only: Set<string> | undefined } {
  const quick = argv.includes("--quick");
  const at = argv.indexOf("--only");
  const list = at >= 0 ? argv[at + 1] : argv.find((a) => a.startsWith("--only="))?.slice("--only=".length);
  return { quick, only: list ? new Set(list.split(",").map((s) => s.trim())) : undefined };
}

/** Replace what is between the markers; without markers, add them under a "## Performance" heading at the end. */
export function withBenchSection(readme: string, body: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start >= 0 && end > start)
    return `${readme.slice(0, start + START.length)}\n${body}\n${readme.slice(end)}`;
  return `${readme.trimEnd()}\n\n## Performance\n\n${START}\n${body}\n${END}\n`;
}

const { quick, only } = parseArgs(process.argv.slice(2));
const machine = machineInfo(REPO_ROOT);
const started = performance.now();
process.stderr.write(
  `machine: ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB, ${machine.platform}; node ${machine.node}, bun ${machine.bun}, opencode ${machine.opencode}\n`,
);
const figures: Figure[] = [];
const failed: string[] = [];
for (const group of GROUPS) {
  if (only && !only.has(group.id)) continue;
  const loadWaitS = (await timed(() => settleLoad(machine.cores))) / 1000;
  const filesStarted = performance.now();
  const fileCreateUs = await settleFiles();
  const filesWaitS = (performance.now() - filesStarted) / 1000;
  const before = os.loadavg()[0] ?? 0;
  process.stderr.write(
    `figure ${group.id}… (load ${before.toFixed(2)} after ${loadWaitS.toFixed(0)} s, file create ${fileCreateUs.toFixed(0)} us after ${filesWaitS.toFixed(0)} s)\n`,
  );
  try {
    const measured = await group.run(quick);
    const load = { before, after: os.loadavg()[0] ?? 0 };
    figures.push(...withLoad(measured, load, group.own, machine.cores).map((f) => ({ ...f, fileCreateUs })));
  } catch (error) {
    // The other groups' figures are still worth printing; the run as a whole is not complete.
    failed.push(group.id);
    process.stderr.write(
      `figure ${group.id} failed: ${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : JSON.stringify(error)}\n`,
    );
  }
}
const totalS = (performance.now() - started) / 1000;
const table = markdownTable(figures);
const machineLine = `${machine.date.slice(0, 10)}, ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB RAM, ${machine.platform}; Node ${machine.node}, Bun ${machine.bun}, OpenCode ${machine.opencode}${quick ? "; --quick" : ""}${only ? `; only ${[...only].join(",")}` : ""}`;
process.stdout.write(
  `\n${machineLine}\n\n${table}\n\n(${totalS.toFixed(0)} s)${failed.length > 0 ? `; failed: ${failed.join(",")}` : ""}\n`,
);

const resultsDir = path.join(REPO_ROOT, "bench", "results");
await mkdir(resultsDir, { recursive: true });
await writeFile(
  path.join(resultsDir, "latest.json"),
  `${JSON.stringify({ machine, quick, only: only ? [...only] : null, durationS: totalS, failed, figures }, null, 2)}\n`,
);
// Only a complete run speaks for the project.
if (failed.length > 0) process.exitCode = 1;
else if (!quick && !only) {
  const readmePath = path.join(REPO_ROOT, "README.md");
  const readme = await readFile(readmePath, "utf8").catch(() => "");
  const body = `Measured ${machineLine} (${totalS.toFixed(0)} s). ${LEGEND}\n\n${table}`;
  await writeFile(readmePath, withBenchSection(readme, body));
  process.stderr.write("README.md: bench table updated\n");
}

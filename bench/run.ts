/**
 * `npm run bench`: measures the project's performance figures on this machine, prints the machine and a table, writes
 * bench/results/latest.json (gitignored) and rewrites the table between the bench markers of README.md.
 * Options: `--quick` (fewer runs, for iteration; the README is left alone), `--only 1,3` (those figures only).
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { benchConcurrent } from "./fig-concurrent.ts";
import { benchDetectDefault } from "./fig-detect.ts";
import { benchHeartbeat } from "./fig-heartbeat.ts";
import { benchMonitor } from "./fig-monitor.ts";
import { benchReal } from "./fig-real.ts";
import { benchStatus } from "./fig-status.ts";
import { benchSweep } from "./fig-sweep.ts";
import { benchWorktree } from "./fig-worktree.ts";
import { machineInfo } from "./machine.ts";
import { type Figure, markdownTable } from "./stats.ts";

const REPO_ROOT = path.resolve(import.meta.dir, "..");
const START = "<!-- bench:start -->";
const END = "<!-- bench:end -->";

const GROUPS: { id: string; run: (quick: boolean) => Promise<Figure[]> }[] = [
  { id: "1", run: benchHeartbeat },
  { id: "2", run: benchStatus },
  { id: "3", run: benchSweep },
  { id: "4", run: benchConcurrent },
  { id: "5", run: benchMonitor },
  // 6 and 7b share one real server.
  { id: "6", run: benchReal },
  { id: "7", run: benchDetectDefault },
  { id: "8", run: benchWorktree },
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
for (const group of GROUPS) {
  if (only && !only.has(group.id)) continue;
  process.stderr.write(`figure ${group.id}…\n`);
  figures.push(...(await group.run(quick)));
}
const totalS = (performance.now() - started) / 1000;
const table = markdownTable(figures);
const machineLine = `${machine.date.slice(0, 10)}, ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB RAM, ${machine.platform}; Node ${machine.node}, Bun ${machine.bun}, OpenCode ${machine.opencode}${quick ? "; --quick" : ""}${only ? `; only ${[...only].join(",")}` : ""}`;
process.stdout.write(`\n${machineLine}\n\n${table}\n\n(${totalS.toFixed(0)} s)\n`);

const resultsDir = path.join(REPO_ROOT, "bench", "results");
await mkdir(resultsDir, { recursive: true });
await writeFile(
  path.join(resultsDir, "latest.json"),
  `${JSON.stringify({ machine, quick, only: only ? [...only] : null, durationS: totalS, figures }, null, 2)}\n`,
);
// Only a complete run speaks for the project.
if (!quick && !only) {
  const readmePath = path.join(REPO_ROOT, "README.md");
  const readme = await readFile(readmePath, "utf8").catch(() => "");
  const body = `Measured ${machineLine}. Medians and p95 over the runs shown; "met" compares the median with the target.\n\n${table}`;
  await writeFile(readmePath, withBenchSection(readme, body));
  process.stderr.write("README.md: bench table updated\n");
}

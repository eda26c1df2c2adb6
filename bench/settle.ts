/**
 * The machine's state before each figure group: the bench waits for what the previous group (or anything before the
 * bench) left behind to pass, so that two runs start each figure from the same state.
 */
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createEmptyExclusive } from "./floors.ts";
import { quantile } from "./stats.ts";

/** Linux recomputes the load average every 5 s: over this long, a load that is falling has fallen. */
const LOAD_FLAT_MS = 6_000;

/** How long the bench waits before a group, at most, and how often it probes the disk: per mode (run.ts). */
export interface Waits {
  /** For the load the previous group left to fall back to the core count. */
  loadMaxMs: number;
  /** Stop waiting for the load once it no longer falls (settleLoad). */
  loadUntilFlat: boolean;
  /** For a file's create + unlink to settle. */
  filesMaxMs: number;
  filesEveryMs: number;
  /** How long the first files wait watches at least, so that "quietest" is not the middle of a spell the run started in. */
  firstWatchMs: number;
}

/**
 * The 1-minute load average decays with a one-minute time constant: after a group that kept five processes busy it
 * stays above the core count for a minute or more, and the next group would be judged noisy for what this bench did.
 * Wait (up to `maxMs`) until it is back at or below the core count; a machine that stays busier is noted as such.
 * `untilFlat` (the short run): stop as well once the load has not fallen for LOAD_FLAT_MS. What this bench left keeps
 * falling; a load that does not is other programs', which no wait of the bench's will end.
 */
export async function settleLoad(
  cores: number,
  maxMs: number,
  untilFlat = false,
): Promise<"settled" | "not falling" | "timed out" | "not waited"> {
  if (maxMs <= 0) return "not waited";
  const deadline = performance.now() + maxMs;
  const seen: { at: number; load: number }[] = [];
  for (;;) {
    const load = os.loadavg()[0] ?? 0;
    const now = performance.now();
    if (load <= cores) return "settled";
    if (now >= deadline) return "timed out";
    const earlier = seen.find(
      (sample) => now - sample.at >= LOAD_FLAT_MS && now - sample.at < LOAD_FLAT_MS + 2_000,
    );
    if (untilFlat && earlier && load >= earlier.load) return "not falling";
    seen.push({ at: now, load });
    await Bun.sleep(1_000);
  }
}

/**
 * Creating a file costs more for a while after many files were removed: ext4 without a journal (this bench's machine)
 * will not reuse an inode freed in the last 60 s (300 s more while its inode table block is unwritten), and checks
 * each such inode in turn before it finds a usable one. Measured here, with nothing else running: an O_EXCL create +
 * unlink costs 20-40 us on a quiet disk; a trickle of creates (200 every 2.5 s) made it climb to 77 us over 27 s, and
 * it fell back every 30 s (the kernel's dirty-page expiry here); it stayed at 270-310 us for 20 s from 10 s after a
 * bench of figures 1 and 2 ended, and was back at 31 us 35 s after. Every lock and atomic write creates a file, so a
 * figure that starts in such a spell (the load wait before it lasts from 0 to 150 s, so one run's figure may meet it
 * and the other's not) runs on a slower disk, and its ratio to a floor made mostly of creates moves: the figure's own
 * work beyond the floor does not slow with it.
 */
/** Within this factor of the quietest cost seen in this run, twice in a row, the disk counts as settled. */
const FILES_SETTLED = 2;

/**
 * The median cost, in microseconds, of the floors' lock (an O_EXCL create) and its unlink, in a fresh directory of the
 * temporary disk.
 */
export function fileCreateCost(): number {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oct-settle-"));
  try {
    const file = path.join(dir, "probe");
    const batches: number[] = [];
    for (let batch = 0; batch < 5; batch++) {
      const started = performance.now();
      for (let i = 0; i < 40; i++) {
        createEmptyExclusive(file);
        unlinkSync(file);
      }
      batches.push(((performance.now() - started) / 40) * 1000);
    }
    return quantile(batches, 0.5);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let quietest = Number.POSITIVE_INFINITY;
let watchedMs = 0;

/** The disk as the last probe found it, for the progress line of a long wait. */
export const lastProbe = { costUs: Number.NaN, limitUs: Number.NaN };

/**
 * Wait until a file's create + unlink costs at most FILES_SETTLED times the quietest cost seen in this run, twice in a
 * row `filesEveryMs` apart (at most `filesMaxMs`). Returns the last cost measured, which the table shows.
 */
export async function settleFiles(waits: Waits): Promise<number> {
  const started = performance.now();
  let previous = Number.POSITIVE_INFINITY;
  for (;;) {
    const cost = fileCreateCost();
    quietest = Math.min(quietest, cost);
    const limit = quietest * FILES_SETTLED;
    Object.assign(lastProbe, { costUs: cost, limitUs: limit });
    const elapsed = performance.now() - started;
    const settled = cost <= limit && previous <= limit && watchedMs + elapsed >= waits.firstWatchMs;
    if (settled || elapsed >= waits.filesMaxMs) {
      watchedMs += elapsed;
      return cost;
    }
    previous = cost;
    await Bun.sleep(waits.filesEveryMs);
  }
}

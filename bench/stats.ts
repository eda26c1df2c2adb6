import os from "node:os";

/** Order statistics for benchmark samples; medians and p95 only, since the machines are shared and noisy. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index] as number;
}

/** The 1-minute load average around a figure's run: above the core count, its timings say little. */
export interface Load {
  before: number;
  after: number;
}

/**
 * The least work any implementation must do for a figure, timed in the same run, process layout and primitives,
 * interleaved round by round with the figure's own rounds.
 */
export interface Floor {
  what: string;
  samples: readonly number[];
  /** Throughputs: the ratio is then floor / figure, so it stays "how many times the floor's cost". */
  higherIsBetter?: boolean;
  /** The judged ratio may not exceed this. */
  maxRatio?: number;
  /** A second floor shown beside the judged one (e.g. the same write without the lock). */
  also?: { what: string; samples: readonly number[] };
  /**
   * The figure's and the floor's value for each round, the two timed back to back (a round median, a total or a
   * rate). When given, the ratio is the median of the rounds' ratios: the disk and the CPU of a shared machine go
   * through slow spells of a fraction of a second to a few seconds, and a pair meets the same spell, so its ratio
   * cancels it where the ratio of the two overall medians would not.
   */
  pairs?: readonly (readonly [subject: number, floor: number])[];
}

export interface Figure {
  id: string;
  name: string;
  unit: string;
  median: number;
  p95: number;
  runs: number;
  floor?: {
    what: string;
    median: number;
    maxRatio?: number;
    also?: { what: string; median: number };
    /** How many round pairs the ratio is the median of (see Floor.pairs); absent: the ratio of the medians. */
    pairs?: number;
    /** The paired rounds' ratios at their first and third quartile: how far a round's ratio strays within the run. */
    pairRatios?: [q1: number, q3: number];
  };
  /** The figure's cost in units of its floor's; above 1 means slower than the floor. */
  ratio?: number;
  target?: string;
  /** Whether the target is met; undefined when there is none, or when the run was too noisy to judge. */
  met?: boolean;
  /** Set by the runner: the 1-minute load average before and after this figure's group. */
  load?: Load;
  /** Set by the runner: what an O_EXCL file's create + unlink cost, in microseconds, once the disk had settled. */
  fileCreateUs?: number;
  /** The load went above the core count during this figure's run: its ratio is shown but not judged. */
  noisy?: boolean;
  /** Counts and simulated time do not depend on how busy the machine is: judged whatever the load. */
  loadFree?: boolean;
  notes?: string;
  /** Set by the runner: this figure's ratio in the last earlier runs of the same mode on this machine, newest first. */
  earlier?: number[];
}

/** Pairs of the per-round values two sides stored by round number (rounds either side missed are left out). */
export function zipRounds(
  subject: readonly (number | undefined)[],
  floor: readonly (number | undefined)[],
): [number, number][] {
  const pairs: [number, number][] = [];
  subject.forEach((value, round) => {
    const base = floor[round];
    if (value !== undefined && base !== undefined) pairs.push([value, base]);
  });
  return pairs;
}

/**
 * The rounds whose floor met a settled disk: its cost within `factor` of the run's first decile. Where both sides make
 * and remove a lock file, this machine's disk goes through spells (seconds to tens of seconds) in which that costs
 * several times as much (bench/settle.ts), and the figure's own work does not slow with it: a round in such a spell
 * has a lower ratio, and a run's median follows the share of its rounds that met one.
 */
function settledRounds<T>(rounds: readonly T[], floorCost: (round: T) => number, factor: number): T[] {
  const limit = factor * quantile(rounds.map(floorCost), 0.1);
  return rounds.filter((round) => floorCost(round) <= limit);
}

/**
 * The pairs a figure judges (its settled rounds, as [figure, floor]) and a note saying how many they are and what the
 * ratio over all rounds was, so a reader sees what the rounds that met a spell would have made of it.
 */
export function judgedSettled<T>(
  rounds: readonly T[],
  pairOf: (round: T) => [number, number],
  floorCost: (round: T) => number,
  how: { factor: number; what: string; decile: string; higherIsBetter?: boolean },
): { pairs: [number, number][]; note: string } {
  const pairs = settledRounds(rounds, floorCost, how.factor).map(pairOf);
  const all = rounds.map(pairOf).map(([subject, floor]) => ratioOf(subject, floor, how.higherIsBetter));
  const note = `${pairs.length} of ${rounds.length} ${how.what} judged, those whose floor wrote within ${how.factor}x its ${how.decile}; all ${rounds.length}: ${quantile(all, 0.5).toFixed(2)}x`;
  return { pairs, note };
}

/** Ratio of a figure's value to its floor's, oriented so that 1 is "as cheap as the floor". */
export function ratioOf(median: number, floor: number, higherIsBetter = false): number {
  return higherIsBetter ? floor / median : median / floor;
}

export function figure(
  id: string,
  name: string,
  unit: string,
  samples: readonly number[],
  judge: {
    floor?: Floor;
    /** An absolute target, for counts (lost updates, unreadable files, writes) only. */
    absolute?: { text: string; ok: (median: number) => boolean };
    loadFree?: boolean;
  } = {},
  notes?: string,
): Figure {
  const median = quantile(samples, 0.5);
  const out: Figure = { id, name, unit, median, p95: quantile(samples, 0.95), runs: samples.length };
  const { floor, absolute } = judge;
  if (floor) {
    const floorMedian = quantile(floor.samples, 0.5);
    out.floor = {
      what: floor.what,
      median: floorMedian,
      ...(floor.maxRatio !== undefined ? { maxRatio: floor.maxRatio } : {}),
      ...(floor.also ? { also: { what: floor.also.what, median: quantile(floor.also.samples, 0.5) } } : {}),
    };
    if (floor.pairs && floor.pairs.length > 0) {
      const ratios = floor.pairs.map(([subject, base]) => ratioOf(subject, base, floor.higherIsBetter));
      out.floor.pairs = floor.pairs.length;
      out.floor.pairRatios = [quantile(ratios, 0.25), quantile(ratios, 0.75)];
      out.ratio = quantile(ratios, 0.5);
    } else out.ratio = ratioOf(median, floorMedian, floor.higherIsBetter);
    if (floor.maxRatio !== undefined) {
      out.target = `<= ${floor.maxRatio}x`;
      out.met = out.ratio <= floor.maxRatio;
    }
  } else if (absolute) {
    out.target = absolute.text;
    out.met = absolute.ok(median);
  }
  if (judge.loadFree) out.loadFree = true;
  if (notes) out.notes = notes;
  return out;
}

/**
 * Tag figures with the load around their run; a load above the core count makes wall-clock figures unjudged. The
 * load after includes the group's own processes (`own`: how many it keeps busy at once), so those are allowed for.
 */
export function withLoad(
  figures: readonly Figure[],
  load: Load,
  own: number,
  cores = os.cpus().length,
): Figure[] {
  const noisy = load.before > cores || load.after > cores + own - 1;
  return figures.map((f) => {
    if (!noisy || f.loadFree) return { ...f, load };
    const { met: _unjudged, ...rest } = f;
    return { ...rest, load, noisy: true };
  });
}

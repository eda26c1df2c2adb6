/**
 * The spread between runs, reported rather than engineered away: every run appends its figures' ratios to
 * bench/results/history.jsonl (gitignored, so it is this machine's), and each figure's note gives its ratio in the
 * last runs of the same mode, so a reader sees how far one run's ratio is from the next's.
 */
import { appendFile, readFile } from "node:fs/promises";
import type { Figure } from "./stats.ts";

/** How many earlier runs a note names. */
const SHOWN = 4;

interface Entry {
  date: string;
  mode: string;
  ratios: Record<string, number>;
}

function parseEntry(line: string): Entry | undefined {
  try {
    const entry = JSON.parse(line) as Partial<Entry>;
    return typeof entry.mode === "string" && typeof entry.ratios === "object" && entry.ratios !== null
      ? (entry as Entry)
      : undefined;
  } catch {
    // A line torn by a run killed while writing it: the others still count.
    return undefined;
  }
}

/** Each figure's ratio in the last SHOWN earlier runs of `mode` that had it, newest first. */
export async function earlierRatios(file: string, mode: string): Promise<Map<string, number[]>> {
  const text = await readFile(file, "utf8").catch(() => "");
  const entries = text
    .split("\n")
    .map(parseEntry)
    .filter((entry): entry is Entry => entry?.mode === mode)
    .reverse();
  const byFigure = new Map<string, number[]>();
  for (const entry of entries)
    for (const [id, ratio] of Object.entries(entry.ratios)) {
      const seen = byFigure.get(id) ?? [];
      if (seen.length < SHOWN) byFigure.set(id, [...seen, ratio]);
    }
  return byFigure;
}

/** Add this run's ratios to the history. */
export async function appendRun(file: string, mode: string, date: string, figures: readonly Figure[]) {
  const ratios = Object.fromEntries(
    figures.flatMap((f) => (f.ratio === undefined ? [] : [[f.id, Number(f.ratio.toFixed(3))]])),
  );
  await appendFile(file, `${JSON.stringify({ date, mode, ratios })}\n`);
}

/**
 * The table the bench prints and the README carries, at most WIDTH columns wide: one short row per figure, and below
 * it a note per figure with what does not fit (the figure's full description, its floor, how its ratio was taken, the
 * load around it).
 */
import type { Figure } from "./stats.ts";

export const WIDTH = 120;
/** The figure column never gets narrower than this, whatever the other columns take. */
const MIN_NAME = 16;
/** The spread column needs this many paired rounds. */
const MIN_PAIRS_SPREAD = 4;

export function fmt(value: number): string {
  if (!Number.isFinite(value)) return "-";
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(3);
}

function verdict(f: Figure): string {
  if (f.noisy) return "noisy";
  if (f.met === undefined) return "";
  return f.met ? "yes" : "**no**";
}

/** A cell's text up to its first parenthesis; the rest goes to the figure's note. */
function headOf(text: string): { head: string; rest?: string } {
  const at = text.indexOf(" (");
  return at > 0 ? { head: text.slice(0, at), rest: text.slice(at + 1) } : { head: text };
}

/** `text` cut at a word boundary to at most `width` characters, with an ellipsis when cut. */
function cut(text: string, width: number): string {
  if (text.length <= width) return text;
  const room = text.slice(0, width - 1);
  const space = room.lastIndexOf(" ");
  return `${(space > width / 2 ? room.slice(0, space) : room).trimEnd()}…`;
}

/** The figure's note: everything about it the row has no room for. */
function noteOf(f: Figure, nameCut: boolean): string {
  const parts: string[] = [];
  if (nameCut) parts.push(f.name);
  if (f.notes) parts.push(f.notes);
  if (f.floor) {
    const also = f.floor.also ? `; ${f.floor.also.what}: ${fmt(f.floor.also.median)} ${f.unit}` : "";
    const paired = f.floor.pairs ? `; ratio: median of ${f.floor.pairs} paired rounds` : "";
    parts.push(`Floor: ${f.floor.what}${also}${paired}`);
  }
  if (f.earlier && f.earlier.length > 0)
    parts.push(`Earlier runs here: ${f.earlier.map((r) => `${r.toFixed(2)}x`).join(", ")} (newest first)`);
  const target = f.target ? headOf(f.target).rest : undefined;
  if (target) parts.push(`Target ${target}`);
  const where: string[] = [];
  if (f.load) where.push(`Load ${f.load.before.toFixed(1)} -> ${f.load.after.toFixed(1)}`);
  if (f.fileCreateUs !== undefined) where.push(`file create ${f.fileCreateUs.toFixed(0)} us`);
  if (f.noisy)
    where.push("noisy (the load went above what the machine and the figure account for): not judged");
  if (where.length > 0) parts.push(where.join(", "));
  return parts.join(". ");
}

/** Words of `text` on lines of at most `width` characters, the lines after the first indented by `indent`. */
export function wrap(text: string, width: number, indent = ""): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    const next = line === "" ? word : `${line} ${word}`;
    if (next.length > width && line !== "") {
      lines.push(line);
      line = `${indent}${word}`;
    } else line = next;
  }
  if (line !== "") lines.push(line);
  return lines;
}

const HEADER = ["#", "figure", "median", "floor", "ratio", "spread", "target", "met"] as const;
const NAME_COLUMN = 1;

function rowOf(f: Figure): string[] {
  // Quartiles of fewer pairs say nothing (the short run's 6b has one).
  const q = (f.floor?.pairs ?? 0) >= MIN_PAIRS_SPREAD ? f.floor?.pairRatios : undefined;
  return [
    f.id,
    f.name,
    `${fmt(f.median)} ${f.unit}`,
    f.floor ? `${fmt(f.floor.median)} ${f.unit}` : "",
    f.ratio === undefined ? "" : `${f.ratio.toFixed(2)}x`,
    q ? `${q[0].toFixed(2)}-${q[1].toFixed(2)}x` : "",
    f.target ? headOf(f.target).head : "",
    verdict(f),
  ];
}

/**
 * The Markdown table and the figures' notes under it, exactly as printed. "spread" is the middle half (first to third
 * quartile) of a paired figure's per-round ratios.
 */
export function markdownTable(figures: readonly Figure[]): string {
  const rows = figures.map(rowOf);
  const widthOf = (column: number) =>
    Math.max(3, HEADER[column]?.length ?? 0, ...rows.map((row) => (row[column] ?? "").length));
  const widths = HEADER.map((_, column) => widthOf(column));
  const others = widths.reduce((sum, w, column) => (column === NAME_COLUMN ? sum : sum + w), 0);
  const room = Math.max(MIN_NAME, WIDTH - others - 3 * (HEADER.length - 1) - 4);
  widths[NAME_COLUMN] = Math.min(widths[NAME_COLUMN] ?? 0, room);
  const cutNames = rows.map((row) => {
    const name = row[NAME_COLUMN] ?? "";
    row[NAME_COLUMN] = cut(name, room);
    return row[NAME_COLUMN] !== name;
  });
  // Columns padded as the formatter lays out markdown tables, so `npm run lint` passes on the README it rewrites.
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  const notes = figures.flatMap((f, i) => wrap(`- ${f.id}: ${noteOf(f, cutNames[i] ?? false)}`, WIDTH, "  "));
  return [line(HEADER), line(widths.map((w) => "-".repeat(w))), ...rows.map(line), "", ...notes].join("\n");
}

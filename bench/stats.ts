/** Order statistics for benchmark samples; medians and p95 only, since the machines are shared and noisy. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index] as number;
}

export interface Figure {
  id: string;
  name: string;
  unit: string;
  median: number;
  p95: number;
  runs: number;
  target?: string;
  /** Whether the median meets the target; undefined when there is no target. */
  met?: boolean;
  notes?: string;
}

export function figure(
  id: string,
  name: string,
  unit: string,
  samples: readonly number[],
  target?: { text: string; ok: (median: number) => boolean },
  notes?: string,
): Figure {
  const median = quantile(samples, 0.5);
  return {
    id,
    name,
    unit,
    median,
    p95: quantile(samples, 0.95),
    runs: samples.length,
    ...(target ? { target: target.text, met: target.ok(median) } : {}),
    ...(notes ? { notes } : {}),
  };
}

function fmt(value: number): string {
  if (!Number.isFinite(value)) return "-";
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(3);
}

/** The Markdown table the README carries, exactly as printed. */
export function markdownTable(figures: readonly Figure[]): string {
  const rows = [
    ["#", "figure", "median", "p95", "unit", "runs", "target", "met"],
    ...figures.map((f) => [
      f.id,
      `${f.name}${f.notes ? ` (${f.notes})` : ""}`,
      fmt(f.median),
      fmt(f.p95),
      f.unit,
      String(f.runs),
      f.target ?? "",
      f.met === undefined ? "" : f.met ? "yes" : "**no**",
    ]),
  ];
  // Columns padded as the formatter lays out markdown tables, so `npm run lint` passes on the README it rewrites.
  const widths =
    rows[0]?.map((_, column) => Math.max(3, ...rows.map((row) => (row[column] ?? "").length))) ?? [];
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  const [header, ...body] = rows;
  return [line(header ?? []), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}

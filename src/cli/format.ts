/** Plain-text tables with optional ANSI colors: colors only when a human is looking (stdout is a TTY). */

const CODES = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1 } as const;
export type Style = keyof typeof CODES;

export type Painter = (text: string, style: Style | undefined) => string;

export function painter(enabled: boolean): Painter {
  return (text, style) => (enabled && style ? `\u001b[${CODES[style]}m${text}\u001b[0m` : text);
}

export interface Cell {
  text: string;
  style?: Style;
}

export function renderTable(headers: string[], rows: Cell[][], paint: Painter): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => row[column]?.text.length ?? 0)),
  );
  const line = (cells: Cell[]) =>
    cells
      .map((cell, column) => paint(cell.text.padEnd(widths[column] ?? 0), cell.style))
      .join("  ")
      .trimEnd();
  const head = line(headers.map((text) => ({ text, style: "bold" as const })));
  return [head, ...rows.map(line)].join("\n");
}

export function formatAge(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "-";
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600)
    return `${Math.floor(seconds / 60)}m${String(Math.floor(seconds % 60)).padStart(2, "0")}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, "0")}m`;
}

export const STATUS_STYLE: Record<string, Style> = {
  spawning: "cyan",
  active: "green",
  idle: "blue",
  inactive: "red",
  shutting_down: "yellow",
  terminated: "gray",
  unknown: "magenta",
};

export const HEALTH_STYLE: Record<string, Style> = {
  healthy: "green",
  degraded: "yellow",
  critical: "red",
  error: "magenta",
  unknown: "gray",
};

/** The one way the CLI shows a moment: local time to the second (JSON keeps the ISO text). */
export function localTime(iso: string | undefined | null): string {
  if (!iso) return "-";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "-";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

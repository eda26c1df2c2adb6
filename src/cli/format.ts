/** Plain-text tables with optional ANSI colors: colors only when a human is looking (stdout is a TTY). */
import { terminalLine } from "./terminal-text.ts";

const CODES = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1 } as const;
export type Style = keyof typeof CODES;

export type Painter = (text: string, style: Style | undefined) => string;

export function painter(enabled: boolean): Painter {
  return (text, style) => (enabled && style ? `\u001b[${CODES[style]}m${text}\u001b[0m` : text);
}

export interface Cell {
  text: string;
  style?: Style;
  /** Longest text shown in this cell (default CELL_MAX): a longer one is cut with `…`. */
  max?: number;
}

const CELL_MAX = 80;

/**
 * A table of cells: every text is shown escaped and cut (terminal-text.ts), so an agent's text cannot draw on the
 * terminal nor push the columns away. `wholeTextsBy` names the command that shows the cut texts whole; a line saying
 * so follows the table when something was cut.
 */
export function renderTable(
  headers: string[],
  rows: Cell[][],
  paint: Painter,
  wholeTextsBy?: string,
): string {
  let cut = false;
  const shown = rows.map((row) =>
    row.map((cell) => {
      const max = cell.max ?? CELL_MAX;
      // Escaping only lengthens a text: when the escaped whole fits, nothing is cut.
      const whole = terminalLine(cell.text);
      const fits = whole.length <= max;
      cut ||= !fits;
      return { ...cell, text: fits ? whole : terminalLine(cell.text, max) };
    }),
  );
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...shown.map((row) => row[column]?.text.length ?? 0)),
  );
  const line = (cells: Cell[]) =>
    cells
      .map((cell, column) => paint(cell.text.padEnd(widths[column] ?? 0), cell.style))
      .join("  ")
      .trimEnd();
  const head = line(headers.map((text) => ({ text, style: "bold" as const })));
  const note =
    cut && wholeTextsBy
      ? [paint(`(texts ending in … are cut: ${wholeTextsBy} shows them whole)`, "gray")]
      : [];
  return [head, ...shown.map(line), ...note].join("\n");
}

/** The warnings under a table, one line each, escaped like its cells. */
export function renderWarnings(warnings: readonly string[], paint: Painter): string[] {
  return warnings.map((warning) => paint(`warning: ${terminalLine(warning)}`, "yellow"));
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

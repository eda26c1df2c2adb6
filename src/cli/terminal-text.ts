/**
 * Text written by models (names, messages, permission patterns, commit subjects, file names) reaches a human's
 * terminal only through here. Control characters, and the characters that reorder or hide text, are shown as visible
 * escapes (`\x1b`, `\r`, `\u202e`): no escape sequence can move the cursor, recolour, retitle the window, write the
 * clipboard (OSC 52) or redraw a line, and no text can be drawn to look like other text (`curl … | sh` as `ls -la`).
 */

/**
 * C0 but tab and newline, DEL, C1, the soft hyphen, bidi marks, embeddings, overrides and isolates, zero-width
 * characters and joiners, line and paragraph separators, invisible operators, the byte-order mark, interlinear
 * annotations and the tag characters (invisible copies of ASCII).
 */
const HIDDEN =
  "\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\ufeff\\ufff9-\\ufffb\\u{e0000}-\\u{e007f}";
/** Within a block (a multi-line text printed as such), tab and newline stay. */
const IN_BLOCK = new RegExp(`[${HIDDEN}]`, "gu");
/** Within a line (a table cell, a line of a list), they are escaped too. */
const IN_LINE = new RegExp(`[\\t\\n${HIDDEN}]`, "gu");

const NAMED: Record<string, string> = { "\t": "\\t", "\n": "\\n", "\r": "\\r" };

function escaped(char: string): string {
  const named = NAMED[char];
  if (named) return named;
  const code = char.codePointAt(0) ?? 0;
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\u{${code.toString(16)}}`;
}

/**
 * `text` as one line for a terminal: everything hidden escaped, newlines and tabs included. With `max`, at most
 * that many characters are shown, the last one `…` when the text was cut (an escape is never cut in half).
 */
export function terminalLine(text: string, max = Number.POSITIVE_INFINITY): string {
  if (text.length <= max) {
    const whole = text.replace(IN_LINE, escaped);
    if (whole.length <= max) return whole;
  }
  let shown = "";
  // Each character shows as at least one: `max` characters of the text are always enough to fill the line.
  for (const char of text.slice(0, max)) {
    const piece = char.replace(IN_LINE, escaped);
    if (shown.length + piece.length > max - 1) break;
    shown += piece;
  }
  return `${shown}…`;
}

/** `text` as lines for a terminal (a diffstat, a usage): newlines and tabs kept, everything else hidden escaped. */
export function terminalBlock(text: string): string {
  return text.replace(IN_BLOCK, escaped);
}

/** As JSON escapes a character: `\uXXXX`, a pair of them beyond the Basic Multilingual Plane. */
function jsonEscaped(char: string): string {
  let out = "";
  for (let i = 0; i < char.length; i++) out += `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
}

/**
 * `data` as JSON for a terminal or a pipe. JSON.stringify escapes C0 but leaves DEL, C1, bidi overrides, zero-widths
 * and U+2028/2029 raw; they can only occur inside strings there, so they are written as `\uXXXX` escapes: the JSON
 * parses to the same value and draws nothing on a terminal.
 */
export function terminalJson(data: unknown, indent?: number): string {
  return JSON.stringify(data, null, indent).replace(IN_BLOCK, jsonEscaped);
}

/**
 * How text an agent wrote goes into another agent's or the leader's session. Our headers (`[message from …]`,
 * `[notice from opencode-teams …]`) start a line; an agent's text never does: it is quoted line by line ("> ") or kept
 * on one line after our own words. The recipients are told so (identity prompt, tool descriptions), so a header an
 * agent pastes into its text, even a real one copied whole, reads as quoted text.
 */

/** Every way a model or a terminal may break a line, not only "\n". */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this finds.
const LINE_BREAK = /\r\n|[\n\r\u000b\u000c\u0085\u2028\u2029]/;

/** `text` as a quoted block: each line starts with "> " (an empty one is ">"). */
export function quoteLines(text: string): string {
  return text
    .split(LINE_BREAK)
    .map((line) => (line === "" ? ">" : `> ${line}`))
    .join("\n");
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this finds.
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** `text` on one line: line breaks shown as " ⏎ ", other control characters as spaces. */
export function inlineText(text: string): string {
  return text.split(LINE_BREAK).join(" ⏎ ").replace(CONTROL, " ");
}

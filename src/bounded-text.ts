/**
 * Texts a caller or an agent wrote are repeated back in results, errors and notices only up to a bound: a 1 MB
 * recipient name or a 500 kB permission pattern must not become a 1 MB error or a 500 kB notice (which a reminder
 * repeats, and which fills the leader's context).
 */

/** A value of the caller's quoted back in an error: a recipient, a task id. */
export const ECHO_MAX = 100;
/**
 * A text an OpenCode event carries (a permission's title and pattern, a question, a session's error), as state,
 * listings and notices keep it.
 */
export const EVENT_TEXT_MAX = 1_000;
/** A whole error or warning. */
export const MESSAGE_TEXT_MAX = 4_000;
/** A whole notice to the leader: room for an agent's completion report (16 kB) and its summary (4,000 characters). */
export const NOTICE_TEXT_MAX = 32_000;

/**
 * `text`, or its first `max` characters and a marker saying how many were cut (and, with `whole`, where the whole text
 * is), so a reader never takes a cut text for all of it.
 */
export function boundText(text: string, max: number, whole?: string): string {
  if (text.length <= max) return text;
  // Never end on the first half of a surrogate pair.
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, end)}… [${text.length - end} more characters cut${whole ? `; ${whole}` : ""}]`;
}

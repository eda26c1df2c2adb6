/**
 * The CLI's JSON uses one key style, camelCase, whatever the data came from (agent-history keeps the snake_case of its
 * file format). Only keys with an underscore between letters change; every key the CLI prints is one of ours.
 */
export function camelKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [
      key.replace(
        /([a-z0-9])_([a-z])/g,
        (_, before: string, letter: string) => `${before}${letter.toUpperCase()}`,
      ),
      camelKeys(inner),
    ]),
  );
}

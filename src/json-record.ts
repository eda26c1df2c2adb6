/** A JSON object read from an event or a server answer, whose fields are still to be checked one by one. */
export type JsonRecord = Record<string, unknown>;

/** `value` when it is a JSON object (not null, not an array), else undefined. */
export function jsonRecord(value: unknown): JsonRecord | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as JsonRecord)
    : undefined;
}

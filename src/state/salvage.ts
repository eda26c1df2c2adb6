import { type AgentState, AgentStateSchema } from "./schemas.ts";

/** What a damaged agent file still says, field by field: each value kept only if it alone is valid. */
export type SalvagedAgent = Partial<
  Pick<
    AgentState,
    | "name"
    | "role"
    | "model"
    | "status"
    | "color"
    | "heartbeatTs"
    | "sessionId"
    | "paneId"
    | "cwd"
    | "createdAt"
    | "prompt"
  >
> & { socket?: string };

const FIELDS = [
  "name",
  "role",
  "model",
  "status",
  "color",
  "heartbeatTs",
  "sessionId",
  "paneId",
  "cwd",
  "createdAt",
  "prompt",
] as const;

/**
 * `"key": "string"` pairs as JSON.stringify writes them. A quote inside a string value is escaped, so text inside the
 * prompt can never pass for a key; a value cut off by truncation has no closing quote and is not matched.
 */
const STRING_PAIR = /"([A-Za-z]+)":\s*("(?:[^"\\\n]|\\.)*")/g;

/** The string-valued pairs of the text, first occurrence of each key (top-level keys precede nested ones we ignore). */
function stringPairs(text: string): Map<string, unknown> {
  const pairs = new Map<string, unknown>();
  for (const match of text.matchAll(STRING_PAIR)) {
    const [, key, literal] = match;
    if (!key || !literal || pairs.has(key)) continue;
    try {
      pairs.set(key, JSON.parse(literal));
    } catch {
      // A damaged escape: that value is lost, the others are not.
    }
  }
  return pairs;
}

/** The fields as parsed JSON gives them (a file that parses but fails its schema), tmux.socket under its own key. */
function parsedPairs(value: unknown): Map<string, unknown> | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  const pairs = new Map<string, unknown>(Object.entries(record));
  const tmux = record.tmux;
  if (tmux && typeof tmux === "object" && "socket" in tmux) pairs.set("socket", tmux.socket);
  else pairs.delete("socket");
  return pairs;
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Recover what can be trusted from a damaged agent file: a torn write loses its tail, a bad field fails the schema,
 * and the fields before or beside the damage are still as we wrote them.
 */
export function salvageAgent(text: string): SalvagedAgent {
  const pairs = parsedPairs(parseOrUndefined(text)) ?? stringPairs(text);
  const salvaged: Record<string, unknown> = {};
  for (const field of FIELDS) {
    const checked = AgentStateSchema.shape[field].safeParse(pairs.get(field));
    if (checked.success && checked.data !== undefined) salvaged[field] = checked.data;
  }
  const socket = pairs.get("socket");
  if (typeof socket === "string" && socket !== "") salvaged.socket = socket;
  return salvaged as SalvagedAgent;
}

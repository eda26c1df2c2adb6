import { type JsonRecord, jsonRecord } from "../json-record.ts";
import type { MessageUsage } from "./opencode-api.ts";

/** A count as the server sent it; anything else (missing, negative, NaN, a string) counts nothing. */
function amount(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}

function tokens(value: unknown): number {
  return Math.round(amount(value));
}

/** A model id as the server names it, bounded: it becomes a key in state files and a column in the CLI. */
function modelName(info: JsonRecord): string {
  const provider = typeof info.providerID === "string" ? info.providerID : "";
  const model = typeof info.modelID === "string" ? info.modelID : "";
  const name = provider && model ? `${provider}/${model}` : model || provider || "unknown";
  // A key of a plain object: "__proto__" would set its prototype instead of counting.
  return name === "__proto__" ? "unknown" : name.slice(0, 200);
}

/**
 * The usage of an assistant message (`AssistantMessage` of `GET /session/{id}/message` or a `message.updated` event's
 * `info`), or undefined for anything else. Read defensively: a field missing in some version counts 0, never throws.
 */
export function assistantUsage(value: unknown): MessageUsage | undefined {
  const info = jsonRecord(value);
  if (info?.role !== "assistant") return undefined;
  const { id, sessionID } = info;
  if (typeof id !== "string" || id === "" || typeof sessionID !== "string" || sessionID === "")
    return undefined;
  const counted = jsonRecord(info.tokens) ?? {};
  const cache = jsonRecord(counted.cache) ?? {};
  return {
    sessionId: sessionID,
    messageId: id,
    model: modelName(info),
    input: tokens(counted.input),
    output: tokens(counted.output),
    reasoning: tokens(counted.reasoning),
    cacheRead: tokens(cache.read),
    cacheWrite: tokens(cache.write),
    cost: amount(info.cost),
  };
}

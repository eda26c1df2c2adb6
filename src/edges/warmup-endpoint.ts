// The warm-up model (specs/spawn-agent.md, "The cold path"): a tiny OpenAI-compatible chat-completions endpoint on
// 127.0.0.1 that the project server's throwaway first turn talks to instead of a real provider. It answers "ok" with
// zero usage, only under its own unguessable path and key, and only while the warm-up lasts.
import { randomBytes, timingSafeEqual } from "node:crypto";

export interface WarmupEndpoint {
  /** `http://127.0.0.1:<port>/<token>/v1`: the provider's `baseURL`. */
  readonly baseUrl: string;
  /** The provider's `apiKey`: every request must carry it as `Authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Chat-completions requests answered so far. */
  readonly served: number;
  /** Requests refused (wrong path, key or method). */
  readonly refused: number;
  /** Resolves when the first request has been answered. */
  readonly firstServed: Promise<void>;
  /** Stop listening (idempotent); requests after this meet a closed port. */
  stop(): void;
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

const sse = (data: unknown): string => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;

/** A minimal valid completion: "ok", stop, zero usage; streamed when the request asks for a stream. */
function completion(body: { stream?: unknown; model?: unknown }): Response {
  const id = "chatcmpl-opencode-teams-warmup";
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === "string" ? body.model : "warm-up";
  const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  if (body.stream !== true) {
    return Response.json({
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
      usage,
    });
  }
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const text =
    sse(chunk({ role: "assistant", content: "ok" }, null)) +
    sse(chunk({}, "stop")) +
    sse({ id, object: "chat.completion.chunk", created, model, choices: [], usage }) +
    sse("[DONE]");
  return new Response(text, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

/** Listen on a free port of 127.0.0.1 with a fresh secret; the caller stops it. */
export function startWarmupEndpoint(): WarmupEndpoint {
  const token = randomBytes(24).toString("base64url");
  const key = randomBytes(24).toString("base64url");
  const path = `/${token}/v1/chat/completions`;
  const first = Promise.withResolvers<void>();
  let served = 0;
  let refused = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const bearer = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1] ?? "";
      if (request.method !== "POST" || !sameSecret(url.pathname, path) || !sameSecret(bearer, key)) {
        refused++;
        return new Response("not found", { status: 404 });
      }
      const body = (await request.json().catch(() => ({}))) as { stream?: unknown; model?: unknown };
      served++;
      const response = completion(body);
      first.resolve();
      return response;
    },
  });
  let stopped = false;
  return {
    baseUrl: `http://127.0.0.1:${server.port}/${token}/v1`,
    apiKey: key,
    get served() {
      return served;
    },
    get refused() {
      return refused;
    },
    firstServed: first.promise,
    stop() {
      if (stopped) return;
      stopped = true;
      void server.stop(true);
    },
  };
}

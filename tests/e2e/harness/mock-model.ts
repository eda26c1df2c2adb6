/**
 * A scripted, OpenAI-compatible chat-completions server for end-to-end tests.
 *
 * OpenCode talks to it through `@ai-sdk/openai-compatible` (see `mockProviderConfig` in opencode-server.ts).
 * By default every answer is derived statelessly from the conversation in the request, using directives embedded
 * in the text of the LAST user message:
 *
 *   @@call <toolName> <json-args>   one tool call per model turn, in order
 *   @@sleep <ms>                    delay the next answer (simulates long work); abortable
 *   @@wait <gate>                   hold the next answer until the test calls `mock.open(gate)`; abortable
 *   @@say <text>                    answer with this text and end the turn (later directives never run)
 *   @@hang                          never answer; the request stays open until the client disconnects
 *   @@error <status> <message>      answer with an HTTP error (use 4xx: OpenCode retries 5xx forever)
 *
 * Lines that do not start with `@@` are ignored. When the directives run out the model answers
 * `DONE <toolName>: <last tool result text>` (or `DONE` when no tool was called).
 * "Which directive is next" = number of assistant tool calls after the last user message, so the same
 * conversation always gets the same answer (retries, restarts, several sessions at once).
 *
 * A request without `tools` (OpenCode's title generator) gets a short plain title.
 * `setHandler` / `onSession` let a test answer a request itself; `requests` records everything received.
 */

export type ChatRole = "system" | "user" | "assistant" | "tool" | "developer";

export interface ChatContentPart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: ChatRole;
  content?: string | ChatContentPart[] | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ChatToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: unknown };
}

export interface ChatRequestBody {
  model?: string;
  stream?: boolean;
  messages: ChatMessage[];
  tools?: ChatToolSpec[];
  [key: string]: unknown;
}

/** One request as the mock saw it. */
export interface MockRequest {
  /** 1-based arrival order. */
  seq: number;
  receivedAt: number;
  headers: Record<string, string>;
  body: ChatRequestBody;
  messages: ChatMessage[];
  /** All system messages' text joined with "\n\n". */
  system: string;
  /** Tool names offered in this request (empty for the title generator). */
  tools: string[];
  /** Text of the last user message (all its text parts joined with "\n"). */
  lastUserText: string;
  /** Messages after the last user message (assistant tool calls and tool results of the current turn). */
  turnMessages: ChatMessage[];
  /** `true` when the request carries no tools (OpenCode's title / summary generator). */
  isTitleRequest: boolean;
  /** OpenCode session id when the request reveals it (header), else undefined. */
  sessionId: string | undefined;
}

/** `gates`: answer only once every named gate is open (`@@wait`), then after `delayMs`. */
export type MockReply =
  | { kind: "text"; text: string; delayMs?: number; gates?: string[] }
  | { kind: "tool"; name: string; args: unknown; callId?: string; delayMs?: number; gates?: string[] }
  | { kind: "error"; status: number; message: string; delayMs?: number; gates?: string[] }
  | { kind: "hang" };

/** Return a reply to answer the request yourself, or undefined to fall through to the script. */
export type MockHandler = (req: MockRequest) => MockReply | undefined | Promise<MockReply | undefined>;

export type Directive =
  | { op: "call"; tool: string; args: unknown }
  | { op: "sleep"; ms: number }
  | { op: "wait"; gate: string }
  | { op: "say"; text: string }
  | { op: "hang" }
  | { op: "error"; status: number; message: string };

export interface MockModel {
  /** e.g. http://127.0.0.1:39123/v1 — pass as MOCK_BASE_URL. */
  readonly baseUrl: string;
  readonly port: number;
  /** Every chat-completions request received, in order. */
  readonly requests: MockRequest[];
  /** Global override; undefined/null restores pure scripting. */
  setHandler(fn: MockHandler | null | undefined): void;
  /**
   * Override for requests of one session. The key matches when it equals the request's `sessionId` or when the
   * last user message contains it (e.g. put `@@tag worker-1` in the prompt and register `"worker-1"`).
   * Returns a function that removes the override.
   */
  onSession(key: string, fn: MockHandler): () => void;
  /** Requests whose system prompt / last user text contains `text`. */
  requestsMatching(pred: (r: MockRequest) => boolean): MockRequest[];
  /** Number of requests currently held open (sleeping, hanging or streaming). */
  readonly inFlight: number;
  /** Forget the recorded requests. */
  clearRequests(): void;
  /** Open a gate: answers held by `@@wait <gate>` go out now, and later ones are not held. */
  open(gate: string): void;
  stop(): Promise<void>;
}

export interface MockModelOptions {
  /** Title returned to requests without tools. */
  title?: string;
  /** Log each request to stderr. */
  verbose?: boolean;
}

const SESSION_HEADERS = [
  "x-opencode-session",
  "x-session-id",
  "session_id",
  "session-id",
  "x-session-affinity",
];

export function textOf(content: ChatMessage["content"]): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content
    .map((p) => (typeof p.text === "string" ? p.text : ""))
    .filter((t) => t !== "")
    .join("\n");
}

/** The header the plugin puts at the top of a notice to the leader (src/operations/messages/notice-digest.ts). */
const PLUGIN_NOTICE = "[notice from opencode-teams via team ";

/**
 * The prompt a request answers: the last user message that is not a plugin notice, and the messages after it. A
 * notice is a user message without a turn (`noReply`), and it can land in the session between a test's prompt and the
 * model's next request; taken as the prompt, it would end the test's turn with `DONE` before its directives ran.
 */
export function promptOf(messages: readonly ChatMessage[]): {
  lastUserText: string;
  turnMessages: ChatMessage[];
} {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role !== "user" || textOf(message.content).startsWith(PLUGIN_NOTICE)) continue;
    return { lastUserText: textOf(message.content), turnMessages: messages.slice(i + 1) };
  }
  return { lastUserText: "", turnMessages: [] };
}

/** Parse the `@@` directives of a prompt. Throws on a malformed directive so a typo fails loudly. */
export function parseDirectives(text: string): Directive[] {
  const out: Directive[] = [];
  for (const raw of text.split(/\r?\n/)) {
    // A team message arrives quoted line by line ("> "): its directives are followed, as a model follows the text.
    const line = raw.trim().replace(/^> /, "");
    if (!line.startsWith("@@")) continue;
    const m = /^@@(\w+)\s*(.*)$/s.exec(line);
    if (!m) continue;
    const op = m[1] ?? "";
    const rest = (m[2] ?? "").trim();
    switch (op) {
      case "call": {
        const sp = rest.search(/\s/);
        const tool = sp === -1 ? rest : rest.slice(0, sp);
        const json = sp === -1 ? "" : rest.slice(sp + 1).trim();
        if (tool === "") throw new Error(`mock-model: @@call without a tool name: ${line}`);
        let args: unknown = {};
        if (json !== "") {
          try {
            args = JSON.parse(json);
          } catch (e) {
            throw new Error(`mock-model: bad JSON args in "${line}": ${(e as Error).message}`);
          }
        }
        out.push({ op: "call", tool, args });
        break;
      }
      case "sleep": {
        const ms = Number(rest);
        if (!Number.isFinite(ms) || ms < 0) throw new Error(`mock-model: bad @@sleep: ${line}`);
        out.push({ op: "sleep", ms });
        break;
      }
      case "wait":
        if (rest === "") throw new Error(`mock-model: @@wait without a gate name: ${line}`);
        out.push({ op: "wait", gate: rest });
        break;
      case "say":
        out.push({ op: "say", text: rest });
        break;
      case "hang":
        out.push({ op: "hang" });
        break;
      case "error": {
        const em = /^(\d{3})\s*(.*)$/s.exec(rest);
        if (!em) throw new Error(`mock-model: bad @@error (want "@@error 400 message"): ${line}`);
        out.push({ op: "error", status: Number(em[1]), message: em[2] || "mock error" });
        break;
      }
      default:
        // Unknown @@words (e.g. @@tag used as an onSession key) are ignored by the script.
        break;
    }
  }
  return out;
}

/**
 * `{{sys:<key>}}` in a prompt becomes the value the system prompt gives for `<key>` (a "key: value" line), so a
 * script can use what only the session knows, e.g. `{{sys:agentId}}` from the agent identity the plugin injects.
 */
export function substituteSystemValues(text: string, system: string): string {
  return text.replace(/\{\{sys:([A-Za-z_][\w-]*)\}\}/g, (whole, key: string) => {
    const found = new RegExp(`\\b${key}\\b["'\`*]*\\s*[:=]\\s*["'\`]?([^\\s"'\`,;)]+)`).exec(system);
    return found?.[1] ?? whole;
  });
}

/** The scripted answer for a request (pure function of the conversation). */
export function scriptedReply(
  req: Pick<MockRequest, "lastUserText" | "turnMessages"> & { system?: string },
): MockReply {
  const directives = parseDirectives(substituteSystemValues(req.lastUserText, req.system ?? ""));
  const calls: ChatToolCall[] = req.turnMessages.flatMap((m) =>
    m.role === "assistant" ? (m.tool_calls ?? []) : [],
  );
  let done = calls.length;
  let delayMs = 0;
  let gates: string[] = [];
  // Only a reply that waits carries the key, so replies of scripts without @@wait compare equal to before.
  const held = (): { gates?: string[] } => (gates.length > 0 ? { gates } : {});
  for (const d of directives) {
    if (d.op === "call") {
      if (done > 0) {
        done -= 1;
        // sleeps and waits before an already-made call belong to an earlier turn
        delayMs = 0;
        gates = [];
        continue;
      }
      return { kind: "tool", name: d.tool, args: d.args, delayMs, ...held() };
    }
    if (d.op === "sleep") {
      delayMs += d.ms;
      continue;
    }
    if (d.op === "wait") {
      gates = [...gates, d.gate];
      continue;
    }
    if (done > 0) continue; // a say/hang/error before an already-made call cannot happen; skip it
    if (d.op === "say") return { kind: "text", text: d.text, delayMs, ...held() };
    if (d.op === "hang") return { kind: "hang" };
    return { kind: "error", status: d.status, message: d.message, delayMs, ...held() };
  }
  const lastCall = calls[calls.length - 1];
  if (!lastCall) return { kind: "text", text: "DONE", delayMs, ...held() };
  const result = [...req.turnMessages]
    .reverse()
    .find((m) => m.role === "tool" && (m.tool_call_id === undefined || m.tool_call_id === lastCall.id));
  return {
    kind: "text",
    text: `DONE ${lastCall.function.name}: ${textOf(result?.content)}`,
    delayMs,
    ...held(),
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function sse(obj: unknown): string {
  return `data: ${JSON.stringify(obj)}\n\n`;
}

function chunk(id: string, created: number, delta: Record<string, unknown>, finish: string | null): string {
  return sse({
    id,
    object: "chat.completion.chunk",
    created,
    model: "mock-model",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
}

function usageChunk(id: string, created: number): string {
  return sse({
    id,
    object: "chat.completion.chunk",
    created,
    model: "mock-model",
    choices: [],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
}

function sseBody(reply: Extract<MockReply, { kind: "text" | "tool" }>, seq: number): string {
  const id = `chatcmpl-mock-${seq}`;
  const created = Math.floor(Date.now() / 1000);
  const parts: string[] = [chunk(id, created, { role: "assistant", content: "" }, null)];
  if (reply.kind === "text") {
    parts.push(chunk(id, created, { content: reply.text }, null));
    parts.push(chunk(id, created, {}, "stop"));
  } else {
    const callId = reply.callId ?? `call_${seq}`;
    parts.push(
      chunk(
        id,
        created,
        {
          tool_calls: [
            {
              index: 0,
              id: callId,
              type: "function",
              function: { name: reply.name, arguments: JSON.stringify(reply.args ?? {}) },
            },
          ],
        },
        null,
      ),
    );
    parts.push(chunk(id, created, {}, "tool_calls"));
  }
  parts.push(usageChunk(id, created));
  parts.push("data: [DONE]\n\n");
  return parts.join("");
}

function isChatRequestBody(v: unknown): v is ChatRequestBody {
  return typeof v === "object" && v !== null && Array.isArray((v as { messages?: unknown }).messages);
}

export async function startMockModel(opts: MockModelOptions = {}): Promise<MockModel> {
  const title = opts.title ?? "Test session";
  const requests: MockRequest[] = [];
  let handler: MockHandler | undefined;
  const sessionHandlers = new Map<string, MockHandler>();
  let seq = 0;
  let inFlight = 0;
  const openControllers = new Set<AbortController>();
  const openGates = new Set<string>();
  /** Answers held by `@@wait`, woken when a gate opens (each re-checks its own gates). */
  const gateWaiters = new Set<() => void>();

  function gatesOpen(gates: readonly string[], signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!signal.aborted && !gates.every((g) => openGates.has(g))) return;
        gateWaiters.delete(check);
        signal.removeEventListener("abort", check);
        resolve();
      };
      gateWaiters.add(check);
      signal.addEventListener("abort", check, { once: true });
      check();
    });
  }

  async function answer(req: MockRequest, signal: AbortSignal): Promise<{ res: Response; hanging: boolean }> {
    let reply: MockReply | undefined;
    for (const [key, fn] of sessionHandlers) {
      if (req.sessionId === key || req.lastUserText.includes(key)) {
        reply = await fn(req);
        if (reply) break;
      }
    }
    if (!reply && handler) reply = await handler(req);
    if (!reply) {
      reply = req.isTitleRequest ? { kind: "text", text: title } : scriptedReply(req);
    }
    if (reply.kind === "hang") {
      // Headers go out, then nothing: OpenCode sees a model that never finishes. Closed when the client leaves.
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          // An SSE comment (ignored by parsers) so the status line and headers are flushed now.
          controller.enqueue(new TextEncoder().encode(": mock-model hanging\n\n"));
          signal.addEventListener(
            "abort",
            () => {
              try {
                controller.close();
              } catch {
                // already closed
              }
            },
            { once: true },
          );
        },
      });
      const res = new Response(stream, {
        headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
      });
      return { res, hanging: true };
    }
    if (reply.gates) await gatesOpen(reply.gates, signal);
    await sleep(reply.delayMs ?? 0, signal);
    if (reply.kind === "error") {
      const res = Response.json(
        { error: { message: reply.message, type: "invalid_request_error", code: String(reply.status) } },
        { status: reply.status },
      );
      return { res, hanging: false };
    }
    const res = new Response(sseBody(reply, req.seq), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
    return { res, hanging: false };
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // @@hang / long @@sleep must not be cut by Bun's idle timer
    async fetch(request: Request): Promise<Response> {
      const url = new URL(request.url);
      const path = url.pathname.replace(/\/+$/, "");
      if (request.method === "GET" && (path === "/v1/models" || path === "/models")) {
        return Response.json({
          object: "list",
          data: [{ id: "mock-model", object: "model", created: 0, owned_by: "mock" }],
        });
      }
      if (request.method !== "POST" || !(path === "/v1/chat/completions" || path === "/chat/completions")) {
        return Response.json(
          { error: { message: `mock-model: no route ${request.method} ${path}` } },
          { status: 404 },
        );
      }
      let body: unknown;
      try {
        body = await request.json();
      } catch {
        return Response.json({ error: { message: "mock-model: body is not JSON" } }, { status: 400 });
      }
      if (!isChatRequestBody(body)) {
        return Response.json({ error: { message: "mock-model: body has no messages" } }, { status: 400 });
      }
      const headers: Record<string, string> = {};
      request.headers.forEach((v, k) => {
        headers[k] = v;
      });
      const messages = body.messages;
      const tools = (body.tools ?? []).map((t) => t.function.name);
      const sessionHeader = SESSION_HEADERS.map((h) => headers[h]).find((v) => v !== undefined && v !== "");
      seq += 1;
      const rec: MockRequest = {
        seq,
        receivedAt: Date.now(),
        headers,
        body,
        messages,
        system: messages
          .filter((m) => m.role === "system" || m.role === "developer")
          .map((m) => textOf(m.content))
          .join("\n\n"),
        tools,
        ...promptOf(messages),
        isTitleRequest: tools.length === 0,
        sessionId: sessionHeader,
      };
      requests.push(rec);
      if (opts.verbose) {
        console.error(
          `[mock-model] #${rec.seq} tools=${tools.length} turn=${rec.turnMessages.length} user=${JSON.stringify(rec.lastUserText.slice(0, 80))}`,
        );
      }
      // One controller per request, aborted by client disconnect or by stop().
      const ac = new AbortController();
      const onAbort = (): void => ac.abort();
      request.signal.addEventListener("abort", onAbort, { once: true });
      openControllers.add(ac);
      inFlight += 1;
      const release = (): void => {
        if (!openControllers.delete(ac)) return;
        inFlight -= 1;
        request.signal.removeEventListener("abort", onAbort);
      };
      ac.signal.addEventListener("abort", release, { once: true });
      try {
        const { res, hanging } = await answer(rec, ac.signal);
        // A hanging stream stays in flight until the client leaves (or stop()); others are done now.
        if (!hanging) release();
        return res;
      } catch (e) {
        release();
        return Response.json(
          { error: { message: `mock-model handler threw: ${(e as Error).message}` } },
          { status: 400 },
        );
      }
    },
  });

  const port = server.port;
  if (port === undefined) throw new Error("mock-model: Bun.serve did not report a port");

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    get inFlight() {
      return inFlight;
    },
    setHandler(fn) {
      handler = fn ?? undefined;
    },
    onSession(key, fn) {
      sessionHandlers.set(key, fn);
      return () => {
        if (sessionHandlers.get(key) === fn) sessionHandlers.delete(key);
      };
    },
    requestsMatching(pred) {
      return requests.filter(pred);
    },
    clearRequests() {
      requests.length = 0;
    },
    open(gate) {
      openGates.add(gate);
      for (const wake of [...gateWaiters]) wake();
    },
    async stop() {
      for (const ac of openControllers) ac.abort();
      await server.stop(true);
    },
  };
}

import { createOpencodeClient, type Event, type OpencodeClient } from "@opencode-ai/sdk";
import { assistantUsage } from "./message-usage.ts";
import type {
  MessageUsage,
  ModelRef,
  OpencodeApi,
  PendingRequest,
  PendingRequestRef,
  SessionStatuses,
} from "./opencode-api.ts";
import type { ModelSettings } from "./warmup-config.ts";

export interface OpencodeClientOptions {
  /** Directory the server scopes sessions by (`?directory=`): the project root. */
  directory: string;
  /** `OPENCODE_SERVER_PASSWORD`, when the server is protected (user `OPENCODE_SERVER_USERNAME` or "opencode"). */
  password?: string;
  username?: string;
  /** Per-request timeout, so a wedged server never hangs a tool call. */
  requestTimeoutMs?: number;
}

/** Credentials come from the environment only, never from argv, so `ps` never shows them. */
export function serverAuthFromEnv(env: NodeJS.ProcessEnv = process.env): {
  password?: string;
  username?: string;
} {
  const password = env.OPENCODE_SERVER_PASSWORD || undefined;
  return password ? { password, username: env.OPENCODE_SERVER_USERNAME || "opencode" } : {};
}

/** The basic-auth header for a protected server (user "opencode" unless named); none without a password. */
export function basicAuthHeaders(credentials: {
  password?: string;
  username?: string;
}): Record<string, string> {
  if (!credentials.password) return {};
  const token = Buffer.from(`${credentials.username ?? "opencode"}:${credentials.password}`).toString(
    "base64",
  );
  return { Authorization: `Basic ${token}` };
}

type SdkResult<T> = { data?: T; error?: unknown; response?: Response };

function explain(what: string, result: SdkResult<unknown>): Error {
  const status = result.response ? ` (HTTP ${result.response.status})` : "";
  const detail = result.error ? `: ${JSON.stringify(result.error).slice(0, 300)}` : "";
  return new Error(`${what} failed${status}${detail}`);
}

/** OpencodeApi over @opencode-ai/sdk (v1 style `{ path, body, query }` calls). */
export class SdkOpencodeApi implements OpencodeApi {
  readonly client: OpencodeClient;
  private readonly timeoutMs: number;

  /** `client` reuses an existing SDK client (the plugin input's, which may talk to its server in-process). */
  constructor(
    readonly baseUrl: string,
    private readonly options: OpencodeClientOptions,
    client?: OpencodeClient,
  ) {
    this.timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.client =
      client ??
      createOpencodeClient({ baseUrl, directory: options.directory, headers: basicAuthHeaders(options) });
  }

  private signal(timeoutMs = this.timeoutMs): AbortSignal {
    return AbortSignal.timeout(timeoutMs);
  }

  private async call<T>(what: string, run: () => Promise<SdkResult<T>>): Promise<T> {
    let result: SdkResult<T>;
    try {
      result = await run();
    } catch (error) {
      throw new Error(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (result.error !== undefined || result.data === undefined) throw explain(what, result);
    return result.data;
  }

  async healthy(timeoutMs = 500): Promise<boolean> {
    try {
      const response = await fetch(new URL("/global/health", this.baseUrl), {
        headers: basicAuthHeaders(this.options),
        signal: this.signal(timeoutMs),
      });
      if (!response.ok) return false;
      const body = (await response.json()) as { healthy?: boolean };
      return body.healthy === true;
    } catch {
      return false;
    }
  }

  async sessionStatuses(directories: readonly string[] = [this.options.directory]): Promise<SessionStatuses> {
    const asked = [...new Set(directories)];
    const lists = await Promise.allSettled(
      asked.map((directory) =>
        this.call(`GET /session/status?directory=${directory}`, () =>
          this.client.session.status({ query: { directory }, signal: this.signal() }),
        ),
      ),
    );
    const out: SessionStatuses = { statuses: {}, failed: {} };
    for (const [index, list] of lists.entries()) {
      const directory = asked[index] ?? "";
      if (list.status === "rejected") {
        out.failed[directory] = list.reason instanceof Error ? list.reason.message : String(list.reason);
        continue;
      }
      for (const [id, status] of Object.entries(list.value)) out.statuses[id] = status.type;
    }
    return out;
  }

  async sessionExists(sessionId: string): Promise<boolean> {
    return (await this.sessionInfo(sessionId)) !== null;
  }

  async sessionParent(sessionId: string): Promise<string | null> {
    return (await this.sessionInfo(sessionId))?.parentID ?? null;
  }

  /** `GET /session/{id}`: the session, or null when the server has none of that id (404). */
  private async sessionInfo(sessionId: string): Promise<{ parentID?: string } | null> {
    const result = await this.client.session
      .get({ path: { id: sessionId }, signal: this.signal() })
      .catch((error: unknown) => {
        throw new Error(
          `GET /session/${sessionId} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    if (result.data) return result.data;
    if (result.response?.status === 404) return null;
    throw explain(`GET /session/${sessionId}`, result);
  }

  async createSession(input: { title: string; directory: string }): Promise<{ id: string }> {
    const session = await this.call("POST /session", () =>
      this.client.session.create({
        body: { title: input.title },
        query: { directory: input.directory },
        signal: this.signal(),
      }),
    );
    return { id: session.id };
  }

  async modelSettings(): Promise<ModelSettings> {
    const config = await this.call("GET /config", () => this.client.config.get({ signal: this.signal() }));
    return {
      ...(config.model ? { model: config.model } : {}),
      ...(config.enabled_providers ? { enabledProviders: config.enabled_providers } : {}),
      ...(config.disabled_providers ? { disabledProviders: config.disabled_providers } : {}),
    };
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.call(`DELETE /session/${sessionId}`, () =>
      this.client.session.delete({ path: { id: sessionId }, signal: this.signal() }),
    );
  }

  async abortSession(sessionId: string): Promise<void> {
    await this.call(`POST /session/${sessionId}/abort`, () =>
      this.client.session.abort({ path: { id: sessionId }, signal: this.signal() }),
    );
  }

  async promptAsync(
    sessionId: string,
    text: string,
    options: { model?: ModelRef; noReply?: boolean } = {},
  ): Promise<void> {
    const result = await this.client.session
      .promptAsync({
        path: { id: sessionId },
        body: { parts: [{ type: "text", text }], model: options.model, noReply: options.noReply },
        signal: this.signal(),
      })
      .catch((error: unknown) => {
        throw new Error(`prompt_async failed: ${error instanceof Error ? error.message : String(error)}`);
      });
    // 204 No Content carries no data: success is the status alone.
    if (result.error !== undefined || (result.response && !result.response.ok)) {
      throw explain(`POST /session/${sessionId}/prompt_async`, result);
    }
  }

  private messages(sessionId: string) {
    return this.call(`GET /session/${sessionId}/message`, () =>
      this.client.session.messages({ path: { id: sessionId }, signal: this.signal() }),
    );
  }

  async messageCount(sessionId: string): Promise<number> {
    return (await this.messages(sessionId)).length;
  }

  async pendingRequests(directories: readonly string[]): Promise<PendingRequest[]> {
    const lists = await Promise.all(
      [...new Set(directories)].flatMap((directory) =>
        (["permission", "question"] as const).map(async (kind) => {
          const items = await this.get(`/${kind}`, directory);
          return (Array.isArray(items) ? items : [])
            .filter((item): item is Record<string, unknown> => item !== null && typeof item === "object")
            .map((properties) => ({ kind, properties }));
        }),
      ),
    );
    return lists.flat();
  }

  /** A GET the 1.x SDK has no method for; the server scopes requests by `directory`. */
  private async get(route: string, directory: string): Promise<unknown> {
    const url = new URL(route, this.baseUrl);
    url.searchParams.set("directory", directory);
    let response: Response;
    try {
      response = await fetch(url, { headers: basicAuthHeaders(this.options), signal: this.signal() });
    } catch (error) {
      throw new Error(`GET ${route} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!response.ok) throw new Error(`GET ${route} failed (HTTP ${response.status})`);
    return response.json();
  }

  async answerPermission(
    request: PendingRequestRef,
    response: "once" | "always" | "reject",
    message?: string,
  ): Promise<void> {
    // The older `/session/{id}/permissions/{id}` route takes no message; this one carries a reject's reason.
    await this.post(`/permission/${encodeURIComponent(request.requestId)}/reply`, request.directory, {
      reply: response,
      ...(message !== undefined ? { message } : {}),
    });
  }

  async answerQuestion(request: PendingRequestRef, answers: readonly string[] | undefined): Promise<void> {
    const id = encodeURIComponent(request.requestId);
    if (answers === undefined) await this.post(`/question/${id}/reject`, request.directory, undefined);
    else {
      const body = { answers: answers.map((answer) => [answer]) };
      await this.post(`/question/${id}/reply`, request.directory, body);
    }
  }

  /** A POST the 1.x SDK has no method for; the server scopes requests by `directory`. */
  private async post(route: string, directory: string, body: unknown): Promise<void> {
    const url = new URL(route, this.baseUrl);
    url.searchParams.set("directory", directory);
    const what = `POST ${route}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...basicAuthHeaders(this.options) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: this.signal(),
      });
    } catch (error) {
      throw new Error(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!response.ok) {
      const detail = (await response.text().catch(() => "")).slice(0, 300);
      throw new Error(`${what} failed (HTTP ${response.status})${detail ? `: ${detail}` : ""}`);
    }
  }

  async userMessageTexts(sessionId: string): Promise<string[]> {
    const texts: string[] = [];
    for (const { info, parts } of await this.messages(sessionId)) {
      if (info.role !== "user") continue;
      texts.push(parts.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n"));
    }
    return texts;
  }

  async messageUsage(sessionId: string): Promise<MessageUsage[]> {
    const usage: MessageUsage[] = [];
    for (const { info } of await this.messages(sessionId)) {
      const counted = assistantUsage(info);
      if (counted) usage.push(counted);
    }
    return usage;
  }

  /**
   * Read over a plain fetch rather than the SDK's `event.subscribe`: on abort, the SDK cancels a reader whose stream
   * the abort has already errored and leaves that rejected promise unhandled (Bun reports it and the process exits
   * 1). One connection, no retries: the monitor reconnects itself and re-reads session statuses after each gap.
   * `GET /event` carries only the events of the directory it names, so an agent spawned with its own `cwd` would go
   * unheard: `GET /global/event` carries every directory's, each wrapped as `{ directory, payload }`.
   */
  async *events(signal: AbortSignal): AsyncIterable<Event> {
    const url = new URL("/global/event", this.baseUrl);
    let response: Response;
    try {
      response = await fetch(url, {
        headers: { Accept: "text/event-stream", ...basicAuthHeaders(this.options) },
        signal,
      });
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
    if (!response.ok || !response.body) throw new Error(`GET /global/event failed (HTTP ${response.status})`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      while (!signal.aborted) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += value;
        const blocks = buffer.split("\n\n");
        buffer = blocks.pop() ?? "";
        for (const block of blocks) {
          const event = parseSseData(block);
          if (event) yield event;
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    } finally {
      // Already errored by an abort: the rejection is expected, and handled here.
      reader.cancel().catch(() => {});
    }
  }
}

/** The event in one server-sent-events block (its `data:` lines, a global `{ directory, payload }` frame), if any. */
function parseSseData(block: string): Event | undefined {
  const data = block
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice("data:".length).replace(/^ /, ""))
    .join("\n");
  if (!data) return undefined;
  try {
    const frame: unknown = JSON.parse(data);
    const event = frame && typeof frame === "object" && "payload" in frame ? frame.payload : frame;
    return event && typeof event === "object" && "type" in event ? (event as Event) : undefined;
  } catch {
    return undefined;
  }
}

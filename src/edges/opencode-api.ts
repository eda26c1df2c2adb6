import type { Event } from "@opencode-ai/sdk";
import type { ModelSettings } from "./warmup-config.ts";

/** What a session is doing, as `GET /session/status` reports it (idle sessions are left out of that map). */
export type SessionActivity = "busy" | "retry" | "idle";

/** What `GET /session/status` answered, directory by directory. */
export interface SessionStatuses {
  /** Non-idle sessions of the directories that answered. */
  statuses: Record<string, SessionActivity>;
  /** Directory -> why it could not be asked. Its sessions are unknown, not idle. */
  failed: Record<string, string>;
}

export interface ModelRef {
  providerID: string;
  modelID: string;
}

/** One assistant message's usage as OpenCode priced it (`AssistantMessage.cost`, `.tokens`). */
export interface MessageUsage {
  sessionId: string;
  messageId: string;
  /** `provider/model` that answered. */
  model: string;
  input: number;
  output: number;
  reasoning: number;
  cacheRead: number;
  cacheWrite: number;
  /** USD; 0 for a model the configuration gives no price. */
  cost: number;
}

/** A request a session waits on; `directory` is the one the session was created in (the server scopes by it). */
export interface PendingRequestRef {
  sessionId: string;
  requestId: string;
  directory: string;
}

/** A request pending on the server, as `GET /permission` / `GET /question` list it (the fields of its asked event). */
export interface PendingRequest {
  kind: "permission" | "question";
  properties: Record<string, unknown>;
}

/**
 * The slice of an OpenCode server the plugin uses. The real one wraps @opencode-ai/sdk (see opencode-client.ts);
 * unit tests pass fakes. Every method resolves or rejects with an Error that says what failed; none hang forever.
 */
export interface OpencodeApi {
  readonly baseUrl: string;
  /** `GET /global/health` answered with healthy: true within `timeoutMs`. */
  healthy(timeoutMs?: number): Promise<boolean>;
  /**
   * Non-idle sessions of these directories and what they are doing (default: the directory the client names). The
   * server lists a session only under the directory it was created in, so ask for every agent's `cwd`. Each directory
   * is asked on its own: one that fails (deleted, timed out) is listed in `failed` and the others still answer.
   * Rejects only when no server can be asked at all.
   */
  sessionStatuses(directories?: readonly string[]): Promise<SessionStatuses>;
  /** true / false when the server answered; throws when it could not be asked. */
  sessionExists(sessionId: string): Promise<boolean>;
  /** The session's `parentID` (a subagent's session names the session that started it); null for a root or unknown one. */
  sessionParent(sessionId: string): Promise<string | null>;
  createSession(input: { title: string; directory: string }): Promise<{ id: string }>;
  /** The model and provider filters of the server's resolved config (`GET /config`, the client's own directory). */
  modelSettings(): Promise<ModelSettings>;
  deleteSession(sessionId: string): Promise<void>;
  abortSession(sessionId: string): Promise<void>;
  /** Start a turn without waiting for it (`prompt_async`); with `noReply` the text is added without starting a turn. */
  promptAsync(
    sessionId: string,
    text: string,
    options?: { model?: ModelRef; noReply?: boolean },
  ): Promise<void>;
  messageCount(sessionId: string): Promise<number>;
  /** The permission requests and questions pending in these directories (a stream gap loses their events). */
  pendingRequests(directories: readonly string[]): Promise<PendingRequest[]>;
  /**
   * Answer a pending permission request (`POST /permission/{requestId}/reply`); `message` goes with a reject: the
   * agent's tool call fails with it as the user's feedback.
   */
  answerPermission(
    request: PendingRequestRef,
    response: "once" | "always" | "reject",
    message?: string,
  ): Promise<void>;
  /** Answer a pending question with one answer per question it asks, or reject it when `answers` is undefined. */
  answerQuestion(request: PendingRequestRef, answers: readonly string[] | undefined): Promise<void>;
  /** The text of every user message of the session, oldest first (a message's text parts joined with "\n"). */
  userMessageTexts(sessionId: string): Promise<string[]>;
  /** Every assistant message's usage in the session (`GET /session/{id}/message`), oldest first. */
  messageUsage(sessionId: string): Promise<MessageUsage[]>;
  /**
   * The server's event stream, for every directory it serves. Ends when the server closes it or `signal` aborts; callers reconnect themselves
   * (OpenCode keeps no replay, so re-read sessionStatuses() after every reconnect).
   */
  events(signal: AbortSignal): AsyncIterable<Event>;
}

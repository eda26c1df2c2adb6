import { boundText, EVENT_TEXT_MAX } from "../../bounded-text.ts";
import type { PendingRequest } from "../../edges/opencode-api.ts";
import { type JsonRecord, jsonRecord } from "../../json-record.ts";
import type { HeartbeatSource } from "../../state/schemas.ts";
import type { WaitingRequest } from "./waiting.ts";

// OpenCode's events (the in-process hook and the project server's stream) read as liveness signals; monitor.ts acts
// on them.

/** What an OpenCode event says about a session, reduced to what liveness needs. */
export type Signal =
  | { kind: "busy"; sessionId: string; source: HeartbeatSource; resync?: boolean }
  /** `child`: a subagent's session of the agent went idle (child-sessions.ts), not the agent's own. */
  | { kind: "idle"; sessionId: string; source: HeartbeatSource; resync?: boolean; child?: string }
  /** `running`: a tool part that is pending or running, so a turn is certainly under way. */
  /** `succeeded`: an assistant message completed without an error, so the model works (model-failure.ts). */
  | { kind: "activity"; sessionId: string; source: HeartbeatSource; running: boolean; succeeded?: boolean }
  /** `statusCode`: the provider's HTTP status, when the error is an APIError that has one. */
  | { kind: "error"; sessionId: string; name: string; message: string | undefined; statusCode?: number }
  | { kind: "deleted"; sessionId: string }
  /** The session asks for a permission or asked a question, and waits for the answer. */
  | { kind: "waiting"; sessionId: string; request: WaitingRequest }
  /** A pending request was answered (by anyone: answer-permission, the pane, the server rejecting it on abort). */
  | { kind: "answered"; sessionId: string; requestId: string };

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * A request's title or pattern as it is kept and shown: bounded, since the agent's model wrote it and every notice,
 * reminder, status and listing repeats it; the whole request stays in the agent's session (its pane shows it).
 */
function requestText(value: string): string {
  return boundText(value, EVENT_TEXT_MAX, "the agent's pane or session shows the whole request");
}

function patternOf(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    const patterns = value.filter((item): item is string => typeof item === "string" && item !== "");
    return patterns.length > 0 ? patterns.join(" ") : undefined;
  }
  return text(value);
}

/**
 * A permission request. OpenCode 1.18.33 sends `permission.asked` (`permission`, `patterns`); the 1.x SDK types name
 * `permission.updated` (`type`, `title`, `pattern`): both are read.
 */
export function permissionAsked(props: JsonRecord): Signal | undefined {
  const sessionId = text(props.sessionID);
  const requestId = text(props.id);
  if (!sessionId || !requestId) return undefined;
  const title = requestText(text(props.title) ?? text(props.permission) ?? text(props.type) ?? "permission");
  const pattern = patternOf(props.patterns) ?? patternOf(props.pattern);
  const always = patternOf(props.always);
  return {
    kind: "waiting",
    sessionId,
    request: {
      kind: "permission",
      requestId,
      title,
      ...(pattern ? { pattern: requestText(pattern) } : {}),
      ...(always ? { always: requestText(always) } : {}),
    },
  };
}

export function questionAsked(props: JsonRecord): Signal | undefined {
  const sessionId = text(props.sessionID);
  const requestId = text(props.id);
  if (!sessionId || !requestId) return undefined;
  const questions = Array.isArray(props.questions) ? props.questions.map(jsonRecord) : [];
  const title = requestText(
    questions
      .map((question) => text(question?.question) ?? text(question?.header))
      .filter((line): line is string => line !== undefined)
      .join(" / ") || "a question",
  );
  const count = questions.length > 1 ? { questions: questions.length } : {};
  return { kind: "waiting", sessionId, request: { kind: "question", requestId, title, ...count } };
}

/** A request the server lists as pending, read as the event that asked it would be. */
export function pendingSignal(item: PendingRequest): Signal | undefined {
  return item.kind === "permission" ? permissionAsked(item.properties) : questionAsked(item.properties);
}

function answered(props: JsonRecord): Signal | undefined {
  const sessionId = text(props.sessionID);
  const requestId = text(props.requestID) ?? text(props.permissionID);
  return sessionId && requestId ? { kind: "answered", sessionId, requestId } : undefined;
}

/**
 * Map an event (in-process bus or SSE; same shape) to a signal. Shapes are read defensively: the stream also carries
 * events the SDK types do not list, and a field missing in some version must not throw.
 */
export function classifyEvent(event: unknown): Signal | undefined {
  const root = jsonRecord(event);
  const type = text(root?.type);
  const props = jsonRecord(root?.properties) ?? {};
  switch (type) {
    case "session.status":
    case "session.idle":
    case "session.updated":
    case "session.deleted":
    case "session.error":
      return sessionSignal(type, props);
    case "message.updated":
    case "message.part.updated":
      return messageSignal(type, props);
    case "permission.asked":
    case "permission.updated":
      return permissionAsked(props);
    case "question.asked":
      return questionAsked(props);
    case "permission.replied":
    case "question.replied":
    case "question.rejected":
      return answered(props);
    default:
      return undefined;
  }
}

function sessionSignal(type: string, props: JsonRecord): Signal | undefined {
  const info = jsonRecord(props.info);
  switch (type) {
    case "session.status": {
      const sessionId = text(props.sessionID);
      const status = text(jsonRecord(props.status)?.type);
      if (!sessionId || !status) return undefined;
      if (status === "busy" || status === "retry")
        return { kind: "busy", sessionId, source: "sdk_session_status" };
      if (status === "idle") return { kind: "idle", sessionId, source: "sdk_session_status" };
      return undefined;
    }
    case "session.idle": {
      const sessionId = text(props.sessionID);
      return sessionId ? { kind: "idle", sessionId, source: "sdk_session_idle" } : undefined;
    }
    case "session.updated": {
      const sessionId = text(props.sessionID) ?? text(info?.id);
      return sessionId
        ? { kind: "activity", sessionId, source: "sdk_session_updated", running: false }
        : undefined;
    }
    case "session.deleted": {
      const sessionId = text(props.sessionID) ?? text(info?.id);
      return sessionId ? { kind: "deleted", sessionId } : undefined;
    }
    case "session.error": {
      const sessionId = text(props.sessionID);
      if (!sessionId) return undefined;
      const error = jsonRecord(props.error);
      const data = jsonRecord(error?.data);
      const statusCode = typeof data?.statusCode === "number" ? data.statusCode : undefined;
      return {
        kind: "error",
        sessionId,
        name: text(error?.name) ?? "UnknownError",
        message: text(data?.message),
        ...(statusCode !== undefined ? { statusCode } : {}),
      };
    }
    default:
      return undefined;
  }
}

function messageSignal(type: string, props: JsonRecord): Signal | undefined {
  if (type === "message.updated") {
    const info = jsonRecord(props.info);
    const sessionId = text(props.sessionID) ?? text(info?.sessionID);
    if (!sessionId) return undefined;
    const succeeded =
      info?.role === "assistant" &&
      typeof jsonRecord(info.time)?.completed === "number" &&
      info.error === undefined;
    return {
      kind: "activity",
      sessionId,
      source: "sdk_message",
      running: false,
      ...(succeeded ? { succeeded } : {}),
    };
  }
  const part = jsonRecord(props.part);
  const sessionId = text(props.sessionID) ?? text(part?.sessionID);
  if (!sessionId) return undefined;
  if (part?.type !== "tool") return { kind: "activity", sessionId, source: "sdk_message", running: false };
  const status = text(jsonRecord(part.state)?.status);
  return {
    kind: "activity",
    sessionId,
    source: "sdk_tool_execute",
    running: status === "pending" || status === "running",
  };
}

/** OpenCode names this error ContextOverflowError; providers' own wording shows up inside APIError messages. */
export function isContextOverflow(name: string, message: string | undefined): boolean {
  if (name === "ContextOverflowError") return true;
  return /context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|context window/i.test(
    message ?? "",
  );
}

/** A session's error as `lastError` keeps it (bounded: a provider's error can carry a whole response body). */
export function describeError(name: string, message: string | undefined): string {
  return boundText(message ? `${name}: ${message}` : name, EVENT_TEXT_MAX);
}

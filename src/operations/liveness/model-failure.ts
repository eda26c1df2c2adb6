import type { AgentState, FailureKind, ModelFailure } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { notifyLeader } from "../messages/notify.ts";
import { describeError, isContextOverflow, type Signal } from "./signals.ts";

// An error that ends a turn (`session.error`) leaves the agent idle and unable to work: it is recorded as `failing`
// until a turn succeeds, and the leader is told once per agent and kind. apply-signal.ts applies what this decides.

type ErrorSignal = Extract<Signal, { kind: "error" }>;

/** The server's error text is provider text: at most this much of it is kept and shown. */
const ERROR_TEXT_MAX = 500;

/**
 * What kind of refusal an error is; undefined for an abort, which we or the user asked for (kill, resume, Esc in the
 * pane) and which is no failure of the model. Retries OpenCode makes by itself never get here: they are
 * `session.status` `retry`, and only the error that ends the turn is a `session.error`.
 */
function failureKind({ name, message = "", statusCode }: ErrorSignal): FailureKind | undefined {
  if (name === "MessageAbortedError") return undefined;
  if (isContextOverflow(name, message)) return "context_overflow";
  if (name === "MessageOutputLengthError") return "output_length";
  if (name === "ContentFilterError") return "content_filter";
  if (name === "ProviderAuthError" || statusCode === 401 || statusCode === 403) return "auth";
  if (/\b(api[ _-]?key|unauthori[sz]ed|authentication)\b/i.test(message)) return "auth";
  if (
    statusCode === 429 ||
    /quota|rate[ _-]?limit|insufficient[ _-]?(credit|balance|funds)|billing/i.test(message)
  )
    return "quota";
  if (
    statusCode === 404 ||
    /model\b.{0,60}\b(not found|does not exist|not supported)|unknown model/i.test(message)
  )
    return "model";
  return name === "APIError" ? "api" : "other";
}

/** Hostile text made safe to store and to put into a prompt or a terminal: one line, no control characters, bounded. */
function boundedText(text: string, max = ERROR_TEXT_MAX): string {
  const line = text
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point.
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function errorLine({ name, message, statusCode }: ErrorSignal): string {
  return boundedText(
    describeError(statusCode === undefined ? name : `${name} (HTTP ${statusCode})`, message),
  );
}

/**
 * `next` with the error recorded: `lastError` (unless `agent` has the same one from within `duplicateWindowMs`: the
 * same event can arrive twice, from the hook and a stream), the session rotation count, and `failing`. `told` is the
 * failure the leader must now hear of: set only the first time a kind shows during one failure, so two processes
 * deciding under the agent's lock tell the leader once.
 */
export function recordError(
  agent: AgentState,
  next: AgentState,
  signal: ErrorSignal,
  now: number,
  duplicateWindowMs: number,
): { next: AgentState; told?: ModelFailure } {
  const description = describeError(signal.name, signal.message);
  const duplicate =
    agent.lastError === description &&
    agent.lastErrorAt !== undefined &&
    now - Date.parse(agent.lastErrorAt) < duplicateWindowMs;
  const nowIso = new Date(now).toISOString();
  let recorded = duplicate
    ? next
    : {
        ...next,
        lastError: description,
        lastErrorAt: nowIso,
        sessionRotationCount:
          next.sessionRotationCount + (isContextOverflow(signal.name, signal.message) ? 1 : 0),
      };
  const kind = failureKind(signal);
  if (!kind) return { next: recorded };
  const before = agent.failing ?? undefined;
  const error = errorLine(signal);
  if (before?.kind === kind && before.error === error) return { next: recorded };
  const isNews = !before?.notified.includes(kind);
  const failing: ModelFailure = {
    kind,
    error,
    since: before?.since ?? nowIso,
    notified: isNews ? [...(before?.notified ?? []), kind] : (before?.notified ?? []),
  };
  recorded = { ...recorded, failing };
  return isNews ? { next: recorded, told: failing } : { next: recorded };
}

/** `next` without its failure once `signal` shows a turn that succeeded. */
export function clearedBySuccess(agent: AgentState, next: AgentState, signal: Signal): AgentState {
  if (!agent.failing || signal.kind !== "activity" || !signal.succeeded) return next;
  return { ...next, failing: null };
}

const KIND_WORDS: Record<FailureKind, string> = {
  auth: "the provider refused its credentials",
  quota: "the provider's quota or rate limit is spent",
  model: "the provider does not offer this model",
  context_overflow: "its conversation no longer fits the model's context",
  output_length: "the model's answer hit its output limit",
  content_filter: "the provider's content filter stopped the answer",
  api: "the provider answered with an error",
  other: "the turn ended in an error",
};

const KIND_ADVICE: Partial<Record<FailureKind, string>> = {
  quota: " If the limit passes soon, a send-message to it retries on the same model.",
  context_overflow:
    " A model with a larger context helps; else kill it and spawn a fresh agent with a summary.",
};

/** The leader's notice: who, on which model, the error, and the next move. */
function failureNotice(agent: AgentState, failure: ModelFailure): string {
  const resume = JSON.stringify({
    teamName: agent.teamName,
    agentId: agent.agentId,
    model: "provider/model",
  });
  return [
    `Agent ${agent.name} (${agent.agentId}) cannot work: its model failed (${failure.kind}: ${KIND_WORDS[failure.kind]}).`,
    // The model name came from a model's tool call: as hostile as the error.
    `Model ${boundedText(agent.model, 200)}, error: ${failure.error}`,
    "Its turn ended and it will not retry by itself.",
    `Next: resume-agent ${resume} continues it on the same session with another model, or kill-agent ends it.${
      KIND_ADVICE[failure.kind] ?? ""
    }`,
  ].join("\n");
}

/** Tell the leader (through the notice digest); a failure to deliver is logged, the inbox keeps it for the sweep. */
export async function tellLeaderFailing(
  ctx: TeamsContext,
  teamName: string,
  agent: AgentState,
  failure: ModelFailure,
): Promise<void> {
  const team = await ctx.store.readTeam(teamName);
  if (team.kind !== "ok") return;
  await notifyLeader(ctx, team.value, {
    type: "agent_failing",
    text: failureNotice(agent, failure),
    data: { agentId: agent.agentId, kind: failure.kind },
  }).catch((error: unknown) => {
    ctx.log("warn", "could not tell the leader that an agent's model fails", {
      team: teamName,
      agent: agent.agentId,
      error: error instanceof Error ? error.message : String(error),
    });
  });
}

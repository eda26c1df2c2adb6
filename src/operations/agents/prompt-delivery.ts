import type { Clock } from "../../clock.ts";
import type { ModelRef, OpencodeApi } from "../../edges/opencode-api.ts";
import type { PaneRef } from "../../edges/tmux-api.ts";
import type { TeamsContext } from "../context.ts";
import { watchMessage } from "../liveness/background.ts";
import { errorText } from "../result.ts";
import { paneTimingOf } from "./agent-pane.ts";

export type PromptDelivery = "sdk" | "pane" | "failed";

export interface DeliveryResult {
  delivery: PromptDelivery;
  problems: string[];
}

export interface DeliveryOptions {
  model?: ModelRef;
  /** The pane to type into when the SDK fails; opened on demand (a spawn opens it after the prompt anyway). */
  pane?: () => Promise<PaneRef & { openedAt?: number }>;
  /** The session's message count when the caller knows it (a session just created has none). */
  messagesBefore?: number;
  /** Called once, when the server first accepts the prompt: the caller's next step may start while it lands. */
  onAccepted?: () => void;
  /** Called right before the first `prompt_async` is sent (the spawn's step clock notes when). */
  onSending?: () => void;
}

/**
 * How long a new session's prompt waits for its user message's event before the server is asked: it shows 8-90 ms
 * after the server accepted the prompt, and each request for the message list would reach the project server in the
 * middle of the agent's first turn (about 10 ms of its first model request, measured).
 */
const EVENT_PROOF_MS = 150;

/** Poll the session's message count until it grows past `before` or `windowMs` passes. */
async function landed(
  clock: Clock,
  api: OpencodeApi,
  sessionId: string,
  before: number,
  windowMs: number,
): Promise<boolean> {
  const deadline = clock.now() + windowMs;
  const longest = Math.max(10, Math.min(100, windowMs / 10));
  // The server shows the message 8-90 ms after accepting it (measured on OpenCode 1.18): look again soon, then less
  // and less often.
  for (let interval = 10; ; interval = Math.min(interval * 2, longest)) {
    const count = await api.messageCount(sessionId).catch(() => undefined);
    if (count !== undefined && count > before) return true;
    if (clock.now() >= deadline) return false;
    await clock.sleep(interval);
  }
}

/**
 * Deliver a prompt and prove it landed: `prompt_async` (with the model override), verified by the session's message
 * count, 3 attempts `promptRetryDelayMs` apart; then typing it into the agent's pane; else report failure.
 */
export async function deliverPrompt(
  ctx: TeamsContext,
  api: OpencodeApi,
  sessionId: string,
  text: string,
  options: DeliveryOptions = {},
): Promise<DeliveryResult> {
  const problems: string[] = [];
  const sdk = await viaSdk(ctx, api, sessionId, text, options, problems);
  if (sdk.landed) return { delivery: "sdk", problems };
  if (!options.pane) return { delivery: "failed", problems };
  try {
    return {
      delivery: await viaPane(ctx, api, sessionId, text, options.pane, sdk.before, problems),
      problems,
    };
  } catch (error) {
    problems.push(`typing into the pane: ${errorText(error)}`);
    return { delivery: "failed", problems };
  }
}

/** The SDK attempts; `before` is the message count the pane fallback compares with (Infinity: unknown). */
async function viaSdk(
  ctx: TeamsContext,
  api: OpencodeApi,
  sessionId: string,
  text: string,
  options: DeliveryOptions,
  problems: string[],
): Promise<{ landed: boolean; before: number }> {
  const delay = ctx.options.promptRetryDelayMs;
  let before: number;
  try {
    before = options.messagesBefore ?? (await api.messageCount(sessionId));
  } catch (error) {
    problems.push(`cannot read the session's messages: ${errorText(error)}`);
    before = Number.POSITIVE_INFINITY;
  }
  for (let attempt = 1; attempt <= 3; attempt++) {
    // A slow earlier attempt may have landed meanwhile: sending again would give the agent its prompt twice.
    if (attempt > 1 && (await landed(ctx.clock, api, sessionId, before, 0))) return { landed: true, before };
    if (Number.isFinite(before)) {
      // A new session's first user message can only be this prompt: its event proves it landed.
      const watch = attempt === 1 && before === 0 ? watchMessage(ctx, sessionId, "prompt") : undefined;
      try {
        if (attempt === 1) options.onSending?.();
        await api.promptAsync(sessionId, text, options.model ? { model: options.model } : {});
        if (attempt === 1) options.onAccepted?.();
        if (await watch?.wait(EVENT_PROOF_MS)) return { landed: true, before };
        if (await landed(ctx.clock, api, sessionId, before, delay)) return { landed: true, before };
        problems.push(`attempt ${attempt}: accepted, but no new message appeared within ${delay} ms`);
      } catch (error) {
        watch?.cancel();
        problems.push(`attempt ${attempt}: ${errorText(error)}`);
        if (attempt < 3) await ctx.clock.sleep(delay);
      }
    } else if (attempt < 3) {
      await ctx.clock.sleep(delay);
      before = await api.messageCount(sessionId).catch(() => Number.POSITIVE_INFINITY);
    }
  }
  return { landed: false, before };
}

/** Typing the prompt into the agent's pane, once the SDK attempts failed (unless the last one landed meanwhile). */
async function viaPane(
  ctx: TeamsContext,
  api: OpencodeApi,
  sessionId: string,
  text: string,
  openPane: NonNullable<DeliveryOptions["pane"]>,
  before: number,
  problems: string[],
): Promise<PromptDelivery> {
  let count = before;
  if (!Number.isFinite(count)) count = await api.messageCount(sessionId);
  else if (await landed(ctx.clock, api, sessionId, count, 0)) return "sdk";
  const pane = await openPane();
  // Keystrokes sent before `opencode attach` has drawn its prompt are lost.
  const timing = paneTimingOf(ctx);
  await ctx.clock.sleep((pane.openedAt ?? 0) + timing.tuiReadyMs - ctx.clock.now());
  await ctx.edges.tmux.sendText(pane, text);
  const window = Math.max(ctx.options.promptRetryDelayMs * 3, timing.settleMs);
  if (await landed(ctx.clock, api, sessionId, count, window)) return "pane";
  problems.push("typing into the pane: no new message appeared");
  return "failed";
}

import type { TeamsContext } from "../context.ts";
import { watchMessage } from "../liveness/background.ts";

/**
 * How long a launch leaves the machine to its agent's first turn, from the prompt's landing to the turn's first model
 * call (its first step: 40-80 ms on a warm project server, measured). Longer, and the launch goes on: a cold or
 * failing server must not hold the leader.
 */
const FIRST_TURN_WAIT_MS = 250;

/** An agent's first turn reaching its model: its first step, as its event reaches this process. */
export interface FirstTurn {
  /** Resolves once the turn began or FIRST_TURN_WAIT_MS passed (at once when no monitor runs here). */
  begun(): Promise<void>;
  cancel(): void;
}

/**
 * Watch from before the prompt is sent, so the event cannot be missed. What a launch does once its prompt is in (the
 * flushes to disk, the session count, the history, the pane's `opencode attach` boot, and its return, after which the
 * leader's own turn goes on) ran beside the agent's first turn on its way to its model, on a machine of two cores,
 * and delayed its first model request by 20-40 ms (measured); it waits for this instead.
 */
export function watchFirstTurn(ctx: TeamsContext, sessionId: string): FirstTurn {
  const watch = watchMessage(ctx, sessionId, "model-call");
  let waiting: Promise<void> | undefined;
  return {
    begun: () => {
      waiting ??= watch ? watch.wait(FIRST_TURN_WAIT_MS).then(() => {}) : Promise.resolve();
      return waiting;
    },
    cancel: () => watch?.cancel(),
  };
}

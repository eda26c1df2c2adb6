import type { Clock } from "../../clock.ts";
import { jsonRecord } from "../../json-record.ts";

/** A watch for a session's next prompt or model call (MessageWatches.watch). */
export interface MessageWatch {
  /** True once the message was seen (before or during the wait), false after `ms`; stops watching either way. */
  wait(ms: number): Promise<boolean>;
  cancel(): void;
}

/**
 * What is watched for: a prompt that landed (its user message) or a model call under way (a step of the turn
 * begins: its `step-start` part, made once the step's snapshot is taken, as its request goes out).
 */
export type Watched = "prompt" | "model-call";

/**
 * Sessions' next prompts and model calls, seen from their events as the monitor receives them (at once, not in its
 * queue): a spawn's proof that its prompt landed, and the sign that the agent's first turn reached its model, without
 * asking the server in the middle of that turn.
 */
export class MessageWatches {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly clock: Clock) {}

  /** Whether anyone watches: the monitor looks at events for them only then. */
  get watching(): boolean {
    return this.waiters.size > 0;
  }

  watch(sessionId: string, watched: Watched): MessageWatch {
    const key = `${watched} ${sessionId}`;
    let seen = false;
    let wake: (() => void) | undefined;
    const waiter = () => {
      seen = true;
      wake?.();
    };
    let set = this.waiters.get(key);
    if (!set) {
      set = new Set();
      this.waiters.set(key, set);
    }
    set.add(waiter);
    const cancel = () => {
      const current = this.waiters.get(key);
      current?.delete(waiter);
      if (current?.size === 0) this.waiters.delete(key);
    };
    const wait = async (ms: number): Promise<boolean> => {
      if (!seen) {
        const woken = new Promise<void>((resolve) => {
          wake = resolve;
        });
        // Not a background wait: a manual clock then ends it at once rather than never.
        await Promise.race([woken, this.clock.sleep(ms)]);
      }
      cancel();
      return seen;
    };
    return { wait, cancel };
  }

  /** Tell the watchers of what an event shows. */
  note(event: unknown): void {
    const seen = watchedIn(event);
    if (seen) for (const waiter of this.waiters.get(seen) ?? []) waiter();
  }
}

/** The watch key an event answers (`<watched> <sessionId>`), if any. */
function watchedIn(event: unknown): string | undefined {
  const root = jsonRecord(event);
  const props = jsonRecord(root?.properties);
  if (root?.type === "message.updated") {
    const info = jsonRecord(props?.info);
    return info?.role === "user" && typeof info.sessionID === "string"
      ? `prompt ${info.sessionID}`
      : undefined;
  }
  if (root?.type === "message.part.updated") {
    const part = jsonRecord(props?.part);
    return part?.type === "step-start" && typeof part.sessionID === "string"
      ? `model-call ${part.sessionID}`
      : undefined;
  }
  return undefined;
}

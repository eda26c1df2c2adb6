import type { Clock } from "../../clock.ts";
import { jsonRecord } from "../../json-record.ts";

/** A watch for a session's next user message (UserMessageWatches.watch). */
export interface UserMessageWatch {
  /** True once the message was seen (before or during the wait), false after `ms`; stops watching either way. */
  wait(ms: number): Promise<boolean>;
  cancel(): void;
}

/**
 * Sessions' next user messages, seen from their `message.updated` events as the monitor receives them (at once, not
 * in its queue): a spawn's proof that its prompt landed, without asking the server in the middle of the agent's first
 * turn.
 */
export class UserMessageWatches {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly clock: Clock) {}

  /** Whether anyone watches: the monitor looks at events for them only then. */
  get watching(): boolean {
    return this.waiters.size > 0;
  }

  watch(sessionId: string): UserMessageWatch {
    let seen = false;
    let wake: (() => void) | undefined;
    const waiter = () => {
      seen = true;
      wake?.();
    };
    let set = this.waiters.get(sessionId);
    if (!set) {
      set = new Set();
      this.waiters.set(sessionId, set);
    }
    set.add(waiter);
    const cancel = () => {
      const current = this.waiters.get(sessionId);
      current?.delete(waiter);
      if (current?.size === 0) this.waiters.delete(sessionId);
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

  /** Tell the watchers of the session whose user message an event is. */
  note(event: unknown): void {
    const root = jsonRecord(event);
    if (root?.type !== "message.updated") return;
    const info = jsonRecord(jsonRecord(root.properties)?.info);
    if (info?.role !== "user" || typeof info.sessionID !== "string") return;
    for (const waiter of this.waiters.get(info.sessionID) ?? []) waiter();
  }
}

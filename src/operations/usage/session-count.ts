import type { MessageUsage } from "../../edges/opencode-api.ts";
import { sumMessages, type UsageSums, withMessage } from "./totals.ts";

/**
 * One session's assistant messages at their latest values, and their sums. A busy session updates its newest message
 * (created, streaming, finished) and then starts the next, so the sums of the messages before the newest are kept and
 * the newest is added to them: the same additions in the same order as summing every message (sumMessages), without
 * going over the whole session at each change. A change to an older message, or a removal, sums them afresh once.
 * Sums handed out are never changed afterwards (each change makes new ones).
 */
export class SessionCount {
  private readonly messages = new Map<string, MessageUsage>();
  /** The last message in `messages`' order. */
  private newest: MessageUsage | undefined;
  /** Sums of every message but `newest`, when known. */
  private before: UsageSums | undefined;
  /** Sums of every message, until the next change. */
  private summed: UsageSums | undefined;

  constructor(listed: Iterable<MessageUsage>) {
    for (const message of listed) this.messages.set(message.messageId, message);
    this.newest = this.last();
  }

  set(message: MessageUsage): void {
    const id = message.messageId;
    this.summed = undefined;
    if (this.newest?.messageId !== id) {
      if (this.messages.has(id)) this.before = undefined;
      else {
        // A new message goes last: the one before it joins the sums kept.
        this.before = !this.newest ? sumMessages([]) : this.before && withMessage(this.before, this.newest);
        this.newest = message;
      }
    } else this.newest = message;
    this.messages.set(id, message);
  }

  delete(messageId: string): void {
    if (!this.messages.delete(messageId)) return;
    this.summed = undefined;
    this.before = undefined;
    this.newest = this.last();
  }

  sums(): UsageSums {
    if (this.summed) return this.summed;
    const newest = this.newest;
    if (!newest) {
      this.summed = sumMessages([]);
      return this.summed;
    }
    this.before ??= sumMessages(this.allButNewest());
    this.summed = withMessage(this.before, newest);
    return this.summed;
  }

  private *allButNewest(): Generator<MessageUsage> {
    let left = this.messages.size - 1;
    for (const message of this.messages.values()) {
      if (left-- <= 0) return;
      yield message;
    }
  }

  private last(): MessageUsage | undefined {
    let last: MessageUsage | undefined;
    for (const message of this.messages.values()) last = message;
    return last;
  }
}

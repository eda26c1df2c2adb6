import { expect, test } from "bun:test";
import type { MessageUsage } from "../../src/edges/opencode-api.ts";
import { SessionCount } from "../../src/operations/usage/session-count.ts";
import { sumMessages } from "../../src/operations/usage/totals.ts";

/** A small deterministic generator: the same sequence on every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

function message(next: () => number, id: string): MessageUsage {
  return {
    sessionId: "ses_1",
    messageId: id,
    model: next() < 0.8 ? "mock/a" : "mock/b",
    input: Math.floor(next() * 1000),
    output: Math.floor(next() * 100),
    reasoning: Math.floor(next() * 10),
    cacheRead: Math.floor(next() * 50),
    cacheWrite: Math.floor(next() * 5),
    // Float prices, whose sums drift unless added in the same order.
    cost: Math.floor(next() * 1e6) / 1e9 + next() / 1e7,
  };
}

test("a session's sums kept as its messages change are those of summing every message, to the last digit", () => {
  for (const seed of [1, 2, 3, 42]) {
    const next = random(seed);
    const listed = Array.from({ length: Math.floor(next() * 5) }, (_, i) => message(next, `msg_${i}`));
    const session = new SessionCount(listed);
    const messages = new Map(listed.map((m) => [m.messageId, m]));
    let newId = listed.length;
    for (let step = 0; step < 400; step++) {
      const roll = next();
      const ids = [...messages.keys()];
      if (roll < 0.55 && ids.length > 0) {
        // The newest message updated again (the usual case).
        const updated = message(next, ids[ids.length - 1] as string);
        session.set(updated);
        messages.set(updated.messageId, updated);
      } else if (roll < 0.85) {
        const added = message(next, `msg_${newId++}`);
        session.set(added);
        messages.set(added.messageId, added);
      } else if (roll < 0.95 && ids.length > 0) {
        const older = message(next, ids[Math.floor(next() * ids.length)] as string);
        session.set(older);
        messages.set(older.messageId, older);
      } else if (ids.length > 0) {
        const removed = ids[Math.floor(next() * ids.length)] as string;
        session.delete(removed);
        messages.delete(removed);
      }
      if (next() < 0.5)
        expect(JSON.stringify(session.sums())).toBe(JSON.stringify(sumMessages(messages.values())));
    }
    expect(JSON.stringify(session.sums())).toBe(JSON.stringify(sumMessages(messages.values())));
  }
});

test("sums handed out are not changed by later messages", () => {
  const next = random(7);
  const session = new SessionCount([message(next, "msg_0")]);
  const first = session.sums();
  const copy = JSON.stringify(first);
  session.set(message(next, "msg_1"));
  session.set(message(next, "msg_1"));
  session.set(message(next, "msg_0"));
  session.delete("msg_0");
  session.sums();
  expect(JSON.stringify(first)).toBe(copy);
});

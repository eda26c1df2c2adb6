/**
 * A last-digest time in the future (a clock stepped back, a hand-edited notice-digest.json) read as a window still
 * open: the leader's notices, agent deaths among them, waited for the whole skew, and past ~24.8 days the timer
 * overflowed to 1 ms and looped. Now such a time counts as a window that has passed.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { deliverPending, notifyLeader } from "../../src/operations/messages/notify.ts";
import { NoticeDigestSchema, type TeamConfig } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";
import type { TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { ledTeamContext } from "../helpers/team.ts";

let ctx: TestContext;
let leaderSession: FakeSession;
let team: TeamConfig;
beforeEach(async () => ({ ctx, leaderSession, team } = await ledTeamContext()));
afterEach(() => ctx.cleanup());

for (const [label, aheadMs] of [
  ["an hour", 3_600_000],
  ["30 days (beyond a timer's range)", 30 * 24 * 3_600_000],
] as const) {
  test(`a last digest ${label} in the future does not hold the leader's notice back`, async () => {
    await writeJson(ctx.store.paths.noticeDigest("alpha"), NoticeDigestSchema, {
      version: 1,
      lastSentAt: new Date(ctx.clock.now() + aheadMs).toISOString(),
    });
    const { delivered } = await notifyLeader(ctx, team, {
      type: "agent_inactive",
      text: "Agent w1 became inactive.",
    });
    expect(delivered).toBe(1);
    expect(leaderSession.prompts).toHaveLength(1);
    ctx.clock.advance(15_000);
    for (let i = 0; i < 3; i++) await deliverPending(ctx, team, new Set());
    expect(leaderSession.prompts).toHaveLength(1);
  });
}

test("a last digest within the clock skew still holds the window, then the notice goes", async () => {
  await writeJson(ctx.store.paths.noticeDigest("alpha"), NoticeDigestSchema, {
    version: 1,
    lastSentAt: new Date(ctx.clock.now() + 1_000).toISOString(),
  });
  const { delivered } = await notifyLeader(ctx, team, {
    type: "agent_inactive",
    text: "Agent w1 became inactive.",
  });
  expect(delivered).toBe(0);
  ctx.clock.advance(ctx.options.noticeDigestMs + 1_000);
  await deliverPending(ctx, team, new Set());
  expect(leaderSession.prompts).toHaveLength(1);
});

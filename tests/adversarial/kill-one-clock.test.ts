/**
 * A graceful kill that joins a shutdown already requested (a second kill-agent call, or one retried after its caller
 * was cut off) waits for the deadline recorded in the agent's state. That deadline is a `ctx.clock` time, and the wait
 * once compared it with the wall clock: with a clock behind the wall clock the joining kill gave up at once and
 * stopped an agent by force that was about to confirm; with one ahead it would wait far past the deadline.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { holdClockAt } from "../helpers/clock-hold.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leadTeam } from "../helpers/team.ts";
import type { toolCaller } from "../helpers/tools.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

beforeEach(async () => {
  // The manual clock stands still at the start of 2026, behind the wall clock.
  ctx = await makeTestContext({ promptRetryDelayMs: 0, shutdownTimeoutMs: 60_000 });
  ({ call } = await leadTeam(ctx, "alpha", LEADER));
});
afterEach(() => ctx.cleanup());

test("a kill joining a requested shutdown waits out the recorded deadline on the context's clock", async () => {
  const spawned = await call<{ agentId: string; sessionId: string; error?: string }>(
    "spawn-agent",
    { teamName: "alpha", prompt: "work" },
    LEADER,
  );
  if (!spawned.agentId) throw new Error(spawned.error);
  const requestedAt = ctx.clock.now();
  await ctx.store.updateAgent("alpha", spawned.agentId, (s) =>
    s
      ? {
          ...s,
          status: "shutting_down",
          shutdownRequestedAt: new Date(requestedAt).toISOString(),
          shutdownDeadlineAt: new Date(requestedAt + 60_000).toISOString(),
        }
      : undefined,
  );

  // The agent confirms 5 s (of the context's clock) into the wait, well before its deadline; the kill's wait is held
  // there until the confirmation is written (its polls move the clock, and would race the confirm-shutdown call).
  const confirmAt = requestedAt + 5_000;
  const hold = holdClockAt(ctx.clock, confirmAt);
  const killing = call<{ method: string; phase: string }>(
    "kill-agent",
    { teamName: "alpha", agentId: spawned.agentId },
    LEADER,
  );
  // A kill that gives up early (the deadline compared with the wall clock) never reaches the hold: it answers first.
  await Promise.race([hold.reached, killing]);
  const confirmed = await call<{ success: boolean }>(
    "confirm-shutdown",
    { teamName: "alpha", agentId: spawned.agentId },
    spawned.sessionId,
  );
  hold.release();

  expect(await killing).toMatchObject({ method: "graceful", phase: "confirmed" });
  expect(confirmed.success).toBe(true);
  expect(ctx.clock.now() - requestedAt).toBeLessThan(60_000);
});

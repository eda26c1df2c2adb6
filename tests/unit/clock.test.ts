import { describe, expect, test } from "bun:test";
import { ManualClock, systemClock } from "../../src/clock.ts";

describe("clock.sleep", () => {
  test("the system clock's sleep waits, and an abort ends it early without throwing", async () => {
    const start = Date.now();
    await systemClock.sleep(30);
    expect(Date.now() - start).toBeGreaterThanOrEqual(25);
    const controller = new AbortController();
    const aborted = systemClock.sleep(10_000, controller.signal);
    controller.abort();
    const t = Date.now();
    await aborted;
    expect(Date.now() - t).toBeLessThan(1_000);
  });

  test("a manual clock's sleep moves its time by the wait, not by wall time", async () => {
    const clock = new ManualClock(1_000);
    await clock.sleep(60_000);
    expect(clock.now()).toBe(61_000);
    const controller = new AbortController();
    controller.abort();
    await clock.sleep(5_000, controller.signal);
    expect(clock.now()).toBe(61_000);
  });
});

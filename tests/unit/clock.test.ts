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

describe("clock.sleep in the background", () => {
  test("a manual clock does not move for a background sleep; it ends once time reaches its end, or on abort", async () => {
    const clock = new ManualClock(1_000);
    let ended = false;
    const waiting = clock.sleep(100, undefined, { background: true }).then(() => {
      ended = true;
    });
    await Bun.sleep(5);
    expect(clock.now()).toBe(1_000);
    expect(ended).toBe(false);
    clock.advance(99);
    await Bun.sleep(5);
    expect(ended).toBe(false);
    // Another sleep moving time ends it as well.
    await clock.sleep(1);
    await waiting;
    expect(ended).toBe(true);

    const controller = new AbortController();
    const aborted = clock.sleep(60_000, controller.signal, { background: true });
    controller.abort();
    await aborted;
    expect(clock.now()).toBe(1_100);
  });

  test("the system clock's background sleep does not keep the process alive", async () => {
    const script =
      'import { systemClock } from "./src/clock.ts"; systemClock.sleep(60_000, undefined, { background: true });';
    const started = Date.now();
    const child = Bun.spawn([process.execPath, "-e", script], {
      cwd: `${import.meta.dir}/../..`,
      stdout: "ignore",
      stderr: "pipe",
    });
    expect(await child.exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

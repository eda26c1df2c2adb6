import type { ManualClock } from "../../src/clock.ts";

export interface ClockHold {
  /** Settles when a wait on the clock first finds it at or past the hold's time. */
  reached: Promise<void>;
  /** Lets the held waits (and every later one) move time again. */
  release(): void;
}

/**
 * A handshake with code polling on a manual clock: each of its waits moves time on by itself, so a test that acts "5 s
 * into the wait" by watching the clock races the poller, and loses when its own act (file locks on a loaded machine)
 * takes longer than the poller needs to run through its deadline. Once the clock reaches `at`, waits stop there
 * until the test releases them. Background waits are not held: they never move time.
 */
export function holdClockAt(clock: ManualClock, at: number): ClockHold {
  const sleep = clock.sleep.bind(clock);
  let reach = () => {};
  let release = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  clock.sleep = async (ms, signal, options) => {
    if (!options?.background && clock.now() >= at) {
      reach();
      await released;
    }
    return sleep(ms, signal, options);
  };
  return { reached, release };
}

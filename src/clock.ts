/**
 * The only source of "now" and of waiting in the domain logic, so tests can move time instead of waiting for it.
 * `sleep` resolves early (without throwing) when `signal` aborts: callers re-check their own condition anyway.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepFor(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

export const systemClock: Clock = { now: () => Date.now(), sleep: sleepFor };

export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

/**
 * A clock tests drive by hand. Its `sleep` moves time forward by the wait and yields one turn of the event loop, so a
 * polling loop runs through its deadline without wall time; tests that wait for real processes use `systemClock`.
 */
export class ManualClock implements Clock {
  constructor(private current = Date.parse("2026-01-01T00:00:00.000Z")) {}
  now(): number {
    return this.current;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return;
    this.current += Math.max(0, ms);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

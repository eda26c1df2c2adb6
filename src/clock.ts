/**
 * The only source of "now" and of waiting in the domain logic, so tests can move time instead of waiting for it.
 * `sleep` resolves early (without throwing) when `signal` aborts: callers re-check their own condition anyway.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal, options?: SleepOptions): Promise<void>;
}

export interface SleepOptions {
  /**
   * A wait in the background (a loop's interval, a flush due later) rather than one a call waits on: it does not keep
   * the process alive, and a manual clock does not move time for it but ends it once time reaches its end.
   */
  background?: boolean;
}

function sleepFor(ms: number, signal?: AbortSignal, options?: SleepOptions): Promise<void> {
  if (signal?.aborted || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    if (options?.background) timer.unref?.();
    signal?.addEventListener("abort", done, { once: true });
  });
}

export const systemClock: Clock = { now: () => Date.now(), sleep: sleepFor };

export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

interface BackgroundWait {
  until: number;
  end(): void;
}

/**
 * A clock tests drive by hand. Its `sleep` moves time forward by the wait and yields one turn of the event loop, so a
 * polling loop runs through its deadline without wall time; tests that wait for real processes use `systemClock`.
 * A background sleep waits until time (moved by the test or by another sleep) reaches its end.
 */
export class ManualClock implements Clock {
  private readonly waits = new Set<BackgroundWait>();
  /** No background wait ends before this: moving time short of it looks at none of them. */
  private nextEnd = Number.POSITIVE_INFINITY;
  constructor(private current = Date.parse("2026-01-01T00:00:00.000Z")) {}
  now(): number {
    return this.current;
  }
  async sleep(ms: number, signal?: AbortSignal, options?: SleepOptions): Promise<void> {
    if (signal?.aborted) return;
    if (options?.background) return this.waitUntil(this.current + Math.max(0, ms), signal);
    this.advance(Math.max(0, ms));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  advance(ms: number): void {
    this.set(this.current + ms);
  }
  set(ms: number): void {
    this.current = ms;
    if (ms < this.nextEnd) return;
    let nextEnd = Number.POSITIVE_INFINITY;
    for (const wait of this.waits) {
      if (wait.until <= this.current) wait.end();
      else nextEnd = Math.min(nextEnd, wait.until);
    }
    this.nextEnd = nextEnd;
  }
  private waitUntil(until: number, signal?: AbortSignal): Promise<void> {
    if (until <= this.current) return Promise.resolve();
    return new Promise((resolve) => {
      const wait: BackgroundWait = {
        until,
        end: () => {
          this.waits.delete(wait);
          signal?.removeEventListener("abort", wait.end);
          resolve();
        },
      };
      this.waits.add(wait);
      this.nextEnd = Math.min(this.nextEnd, until);
      signal?.addEventListener("abort", wait.end, { once: true });
    });
  }
}

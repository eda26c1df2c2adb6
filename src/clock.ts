/** The only source of "now" in the domain logic, so tests can move time instead of waiting for it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

/** A clock tests drive by hand. */
export class ManualClock implements Clock {
  constructor(private current = Date.parse("2026-01-01T00:00:00.000Z")) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

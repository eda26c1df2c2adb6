import type { Clock } from "../../clock.ts";

/** Progress shown while the tool runs (OpenCode's ToolContext.metadata). */
export type SpawnProgress = (step: string) => void;

/** Per-step durations for the log (where a slow spawn spends its time), and progress shown to the caller. */
export class StepClock {
  readonly timings: Record<string, number> = {};
  private step = "validate";
  private startedAt: number;
  private readonly origin: number;
  constructor(
    private readonly clock: Clock,
    private readonly report: SpawnProgress,
  ) {
    this.startedAt = clock.now();
    this.origin = this.startedAt;
  }
  /** Milliseconds since the call started, kept under `name` (e.g. when the first prompt was sent). */
  at(name: string): void {
    this.timings[name] = this.clock.now() - this.origin;
  }
  mark(step: string): void {
    this.timings[this.step] = this.clock.now() - this.startedAt;
    this.step = step;
    this.startedAt = this.clock.now();
  }
  progress(step: string, text: string): void {
    this.mark(step);
    this.report(text);
  }
}

import type { Clock } from "../../clock.ts";

/** Progress shown while the tool runs (OpenCode's ToolContext.metadata). */
export type SpawnProgress = (step: string) => void;

/** Per-step durations for the log (where a slow spawn spends its time), and progress shown to the caller. */
export class StepClock {
  readonly timings: Record<string, number> = {};
  private step = "validate";
  private startedAt: number;
  constructor(
    private readonly clock: Clock,
    private readonly report: SpawnProgress,
  ) {
    this.startedAt = clock.now();
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

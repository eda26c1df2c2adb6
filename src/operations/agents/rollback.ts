import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";

/** A launch step that failed, carrying the error text specs/spawn-agent.md names for the response. */
export class StepFailure extends Error {}

/** Undo what a failed spawn had done, newest first, so no ghost agent (session, pane, color, member, file) remains. */
export class Rollback {
  private readonly steps: { what: string; undo: () => Promise<unknown> }[] = [];
  constructor(private readonly ctx: TeamsContext) {}
  push(what: string, undo: () => Promise<unknown>): void {
    this.steps.push({ what, undo });
  }
  async run(): Promise<string[]> {
    const problems: string[] = [];
    for (const step of this.steps.reverse()) {
      try {
        const result = await step.undo();
        if (Array.isArray(result)) problems.push(...result.map(String));
      } catch (error) {
        problems.push(`could not undo ${step.what}: ${errorText(error)}`);
      }
    }
    if (problems.length > 0) this.ctx.log("warn", "spawn rollback left something behind", { problems });
    return problems;
  }
}

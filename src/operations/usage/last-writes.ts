import type { Budget } from "../../state/usage-schema.ts";
import type { UsageSums } from "./totals.ts";

/** What this process last wrote for a session's record: when, and what decides whether the next change waits. */
export interface LastWrite {
  at: number;
  budget: Budget | undefined;
  base: UsageSums | undefined;
}

/** The usage counter's last writes by team, then session: looked up at every usage event, so no key is built for it. */
export class LastWrites {
  private readonly byTeam = new Map<string, Map<string, LastWrite>>();

  get(teamName: string, sessionId: string): LastWrite | undefined {
    return this.byTeam.get(teamName)?.get(sessionId);
  }

  note(
    teamName: string,
    sessionId: string,
    at: number,
    budget: Budget | undefined,
    base: UsageSums | undefined,
  ): void {
    let team = this.byTeam.get(teamName);
    if (!team) {
      team = new Map();
      this.byTeam.set(teamName, team);
    }
    const last = team.get(sessionId);
    if (!last) team.set(sessionId, { at, budget, base });
    else {
      last.at = at;
      last.budget = budget;
      last.base = base;
    }
  }
}

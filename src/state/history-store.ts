import type { LockTiming } from "./lock.ts";
import type { StoragePaths } from "./paths.ts";
import { type AgentHistory, AgentHistorySchema } from "./schemas.ts";
import { readJson, updateJson } from "./store.ts";

export interface HistoryRead {
  history: AgentHistory;
  warnings: string[];
}

/** What the caller is told about a damaged history: it was moved aside and the history rebuilt. */
const rebuiltNote = (warning: string) => `${warning}; history rebuilt from the agent state files`;

/**
 * A team's agent-history.json (specs/agent-history.md). A damaged file is moved aside and replaced by what `rebuild`
 * makes of the agent files, written under the history's lock; the caller gets a warning, never an error.
 */
export class HistoryStore {
  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
  ) {}

  /**
   * The history; a missing file is `empty`, a damaged one is rebuilt and written, only if nobody wrote a history
   * meanwhile (that one is returned instead).
   */
  async read(
    teamName: string,
    empty: AgentHistory,
    rebuild: () => Promise<AgentHistory>,
  ): Promise<HistoryRead> {
    const file = this.paths.history(teamName);
    const read = await readJson(file, AgentHistorySchema);
    if (read.kind === "ok") return { history: read.value, warnings: [] };
    if (read.kind === "missing") return { history: empty, warnings: [] };
    const rebuilt = await updateJson(
      file,
      AgentHistorySchema,
      async (current) => (current ? undefined : rebuild()),
      this.lockTiming,
    );
    return {
      history: rebuilt.value ?? empty,
      warnings: [read.warning, ...rebuilt.warnings].map(rebuiltNote),
    };
  }

  /**
   * Read-modify-write under the history's lock. `change` sees undefined when the file is missing or was damaged (and
   * moved aside): it rebuilds. Returns the damage warnings.
   */
  async update(
    teamName: string,
    change: (current: AgentHistory | undefined) => Promise<AgentHistory>,
  ): Promise<string[]> {
    const outcome = await updateJson(
      this.paths.history(teamName),
      AgentHistorySchema,
      change,
      this.lockTiming,
    );
    return outcome.warnings.map(rebuiltNote);
  }
}

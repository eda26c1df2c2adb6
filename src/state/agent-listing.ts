// A team's agents listed: every readable agent as a view (cached by each file's stat), and the agents known only by
// the traces they left.
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { AgentFiles, SlotRead } from "./agent-files.ts";
import { type AgentView, viewOf } from "./agent-view.ts";
import type { Listed } from "./listed.ts";
import { isAgentId, type StoragePaths } from "./paths.ts";
import { type SalvagedAgent, salvageAgent } from "./salvage.ts";
import { type AgentState, AgentStateSchema } from "./schemas.ts";
import { StatCache } from "./stat-cache.ts";
import { listDir, parseJson, type ReadResult } from "./store.ts";

/** An agent known only by its traces (see AgentListing.unreadable). */
export interface UnreadableAgent {
  agentId: string;
  /** The newest damaged copy moved aside, and what was wrong with it; absent when none is left. */
  movedTo?: string;
  problem?: string;
  salvaged: SalvagedAgent;
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Agents that left a trace in their team's agents directory (a damaged copy moved aside, a heartbeat slot) but have no
 * state file, from its listing: id -> its damaged copies, oldest first (the names sort by the time they were moved).
 */
function tracesWithoutFile(names: readonly string[]): ReadonlyMap<string, readonly string[]> {
  const present = new Set<string>();
  const traces = new Map<string, string[]>();
  const add = (agentId: string, copy?: string) => {
    const copies = traces.get(agentId) ?? [];
    if (copy) copies.push(copy);
    traces.set(agentId, copies);
  };
  for (const name of names) {
    if (name.endsWith(".json")) present.add(name.slice(0, -".json".length));
    else if (name.endsWith(".hb")) add(name.slice(0, -".hb".length));
    else {
      const at = name.indexOf(".json.corrupt-");
      if (at > 0) add(name.slice(0, at), name);
    }
  }
  for (const [agentId, copies] of traces) {
    if (present.has(agentId) || !isAgentId(agentId)) traces.delete(agentId);
    else copies.sort();
  }
  return traces;
}

export class AgentListing {
  /** Listings only: single reads (under a lock, before a write) always go to the file. */
  private readonly listedAgents = new StatCache<ReadResult<AgentState>>();
  private readonly listedSlots = new StatCache<SlotRead>();
  /** Per team agents directory: see unreadable. */
  private readonly agentTraces = new StatCache<ReadonlyMap<string, readonly string[]>>();
  /** How many agent files each team had at its last listing (see views). */
  private readonly listedCounts = new Map<string, number>();

  constructor(
    private readonly paths: StoragePaths,
    private readonly agents: AgentFiles,
  ) {}

  /** Ids of the team's agent files (a directory listing; nothing is read). */
  async ids(teamName: string): Promise<string[]> {
    return (await listDir(this.paths.agentsDir(teamName)))
      .filter((file) => file.endsWith(".json"))
      .map((file) => file.slice(0, -".json".length))
      .filter(isAgentId);
  }

  /**
   * Agents whose state file is gone while traces of them remain: a damaged copy moved aside, or a heartbeat slot. Such
   * an agent may still run (its pane, session, tasks and color held), so callers show it rather than forget it. What
   * the newest damaged copy still says is salvaged; its problem is described again on every call, the file being
   * moved aside only once.
   */
  async unreadable(teamName: string): Promise<UnreadableAgent[]> {
    const dir = this.paths.agentsDir(teamName);
    // Cached by the directory's stat, which changes whenever a file in it comes or goes: listings stay one stat dearer.
    const traces = await this.agentTraces.get(dir, async () => tracesWithoutFile(await listDir(dir)));
    return Promise.all(
      [...traces].map(async ([agentId, copies]) => {
        const newest = copies.at(-1);
        if (!newest) return { agentId, salvaged: {} };
        const movedTo = path.join(dir, newest);
        const text = await readFile(movedTo, "utf8").catch(() => "");
        const parsed = parseJson(text, AgentStateSchema);
        const problem = parsed.ok ? "unreadable when it was moved aside" : parsed.problem;
        return { agentId, movedTo, problem, salvaged: salvageAgent(text) };
      }),
    );
  }

  /** Every readable agent of one team; damaged files are moved aside (unreadable shows their agents). */
  async views(teamName: string): Promise<Listed<AgentView>> {
    const ids = await this.ids(teamName);
    const filesOf = this.paths.agentFilesOf(teamName);
    const warnings: string[] = [];
    const items: AgentView[] = [];
    const seen = new Set<string>();
    await Promise.all(
      ids.map(async (agentId) => {
        const { state: stateFile, slot: slotFile } = filesOf(agentId);
        seen.add(stateFile).add(slotFile);
        // Both at once: listing 1000 agents is 2000 small reads, and waiting for each pair in turn doubles the latency.
        const [state, heartbeat] = await Promise.all([
          this.listedAgents.get(stateFile, () => this.agents.read(teamName, agentId)),
          this.listedSlots.get(slotFile, () => this.agents.readHeartbeat(teamName, agentId)),
        ]);
        const read = viewOf(state, heartbeat);
        if (read.kind === "ok") {
          items.push(read.value);
          warnings.push(...read.warnings);
        }
        // A damaged file is moved aside here, silently: unreadable reports that agent on every listing.
      }),
    );
    // Files only go away when agents do: while the team's count is unchanged, the caches hold nothing to drop (an
    // agent replaced by another between two listings leaves one entry behind until the count changes; a stale entry
    // is never used, the file's stat is checked first).
    if (this.listedCounts.get(teamName) !== ids.length) {
      this.forgetOthers(teamName, seen);
      this.listedCounts.set(teamName, ids.length);
    }
    // Plain code-unit order: ISO timestamps sort as text, and localeCompare cost a seventh of a 1000-agent listing.
    items.sort((a, b) => byText(a.state.createdAt, b.state.createdAt) || byText(a.state.name, b.state.name));
    return { items, warnings };
  }

  /** Drop cached files of `teamName` that no longer exist; other teams' entries are left alone. */
  private forgetOthers(teamName: string, seen: ReadonlySet<string>): void {
    const prefix = `${this.paths.agentsDir(teamName)}${path.sep}`;
    for (const cache of [this.listedAgents, this.listedSlots]) {
      cache.retain((file) => !file.startsWith(prefix) || seen.has(file));
    }
  }
}

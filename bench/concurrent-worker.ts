/**
 * One process of figure 4. `writer`: round-robin over the team's agents until the deadline, in slices of time shared
 * by all writers (the same wall clock): heartbeats in one slice, bare locked slot writes (the figure's floor) in the
 * next, and so on; prints how many heartbeats succeeded per agent and how many calls each slice started. `reader`:
 * reads every agent file and heartbeat slot in a loop without the store's retries or quarantine, and prints what it
 * found.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { systemClock } from "../src/clock.ts";
import { heartbeat } from "../src/operations/liveness/heartbeat.ts";
import { parseOptions } from "../src/options.ts";
import { decodeSlot } from "../src/state/heartbeat-slot.ts";
import { StoragePaths } from "../src/state/paths.ts";
import { AgentStateSchema } from "../src/state/schemas.ts";
import { parseJson } from "../src/state/store.ts";
import { TeamStore } from "../src/state/team-store.ts";
import { offlineEdges } from "../tests/helpers/context.ts";
import { lockedSlotWrite } from "./floors.ts";

export interface WriterResult {
  /** Heartbeats that succeeded, per agent. */
  ok: Record<string, number>;
  failed: number;
  statusWrites: number;
  /** Calls started in each slice (heartbeats in heartbeat slices, floor writes in the others). */
  slices: number[];
}

export interface ReaderResult {
  passes: number;
  fileReads: number;
  /** Slot reads whose checksum did not match (a write in flight); the store re-reads those. */
  slotRetries: number;
  /** Files still unreadable after the store's 5 attempts (slots) or at once (JSON files, replaced by rename). */
  unreadable: number;
}

/** What the bench passes on the command line. */
export interface WorkerArgs {
  role: "writer" | "reader";
  root: string;
  teamName: string;
  /** agentId:sessionId pairs. */
  agents: string[];
  /** Everyone starts at this time (process start-up is not counted) and stops at the deadline. */
  startAt: number;
  deadline: number;
  seed: number;
  /** Length of a slice; slices alternate heartbeats and floor writes from `startAt` on. */
  sliceMs: number;
  /** Whether the first slice is a floor slice (rounds take turns, so neither kind always goes first). */
  floorFirst: boolean;
}

/** The slice `time` falls in, and whether it is a floor slice. */
function sliceAt(args: WorkerArgs, time: number): { slice: number; floor: boolean } {
  const slice = Math.floor((time - args.startAt) / args.sliceMs);
  return { slice, floor: (slice % 2 === 0) === args.floorFirst };
}

async function writer(args: WorkerArgs): Promise<WriterResult> {
  const store = new TeamStore(new StoragePaths(args.root));
  const ctx = {
    projectRoot: args.root,
    store,
    clock: systemClock,
    options: parseOptions({ background: false }),
    log: () => {},
    edges: offlineEdges(),
  };
  const agents = args.agents.map((pair) => {
    const [agentId = "", sessionId = ""] = pair.split(":");
    return { agentId, sessionId };
  });
  const floorSlots = agents.map(
    ({ agentId }) => `${store.paths.heartbeatSlot(args.teamName, agentId)}.floor`,
  );
  const result: WriterResult = { ok: {}, failed: 0, statusWrites: 0, slices: [] };
  let i = args.seed;
  for (let now = Date.now(); now < args.deadline; now = Date.now()) {
    const { slice, floor } = sliceAt(args, now);
    result.slices[slice] = (result.slices[slice] ?? 0) + 1;
    if (floor) {
      await lockedSlotWrite(floorSlots[i++ % floorSlots.length] as string);
      continue;
    }
    const agent = agents[i % agents.length];
    if (!agent) break;
    i++;
    // One call in a hundred changes the status, so durable agent-file replaces race the readers too.
    const status = i % 100 === 0 ? (i % 200 === 0 ? "idle" : "active") : undefined;
    const out = await heartbeat(
      ctx,
      { teamName: args.teamName, agentId: agent.agentId, ...(status ? { status } : {}) },
      agent.sessionId,
    );
    if (out.success) {
      result.ok[agent.agentId] = (result.ok[agent.agentId] ?? 0) + 1;
      if (status) result.statusWrites++;
    } else result.failed++;
  }
  return result;
}

async function reader(args: WorkerArgs): Promise<ReaderResult> {
  const dir = new StoragePaths(args.root).agentsDir(args.teamName);
  const result: ReaderResult = { passes: 0, fileReads: 0, slotRetries: 0, unreadable: 0 };
  while (Date.now() < args.deadline) {
    for (const name of await readdir(dir)) {
      const file = path.join(dir, name);
      if (name.endsWith(".json")) {
        result.fileReads++;
        const text = await readFile(file, "utf8").catch(() => "");
        if (!parseJson(text, AgentStateSchema).ok) result.unreadable++;
      } else if (name.endsWith(".hb")) {
        result.fileReads++;
        let ok = false;
        for (let attempt = 0; attempt < 5 && !ok; attempt++) {
          const bytes = await readFile(file);
          const end = bytes.lastIndexOf(0x7d);
          ok = decodeSlot(bytes.toString("utf8", 0, end + 1)).ok;
          if (!ok) result.slotRetries++;
        }
        if (!ok) result.unreadable++;
      }
    }
    result.passes++;
  }
  return result;
}

if (import.meta.main) {
  const args = JSON.parse(process.argv[2] ?? "{}") as WorkerArgs;
  await Bun.sleep(Math.max(0, args.startAt - Date.now()));
  const out = args.role === "writer" ? await writer(args) : await reader(args);
  process.stdout.write(JSON.stringify(out));
}

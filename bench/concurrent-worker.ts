/**
 * One process of figure 4. `writer`: heartbeats round-robin over the team's agents until the deadline, then prints
 * how many succeeded per agent. `floor`: the same round-robin of bare locked slot writes (the figure's floor). `reader`: reads every agent file and heartbeat slot in a loop without the store's
 * retries or quarantine, and prints what it found.
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
  ok: Record<string, number>;
  failed: number;
  statusWrites: number;
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
  role: "writer" | "floor" | "reader";
  root: string;
  teamName: string;
  /** agentId:sessionId pairs. */
  agents: string[];
  /** Everyone starts at this time (process start-up is not counted) and stops at the deadline. */
  startAt: number;
  deadline: number;
  seed: number;
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
  const result: WriterResult = { ok: {}, failed: 0, statusWrites: 0 };
  let i = args.seed;
  while (Date.now() < args.deadline) {
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

async function floorWriter(args: WorkerArgs): Promise<WriterResult> {
  const paths = new StoragePaths(args.root);
  const slots = args.agents.map(
    (pair) => `${paths.heartbeatSlot(args.teamName, pair.split(":")[0] ?? "")}.floor`,
  );
  const result: WriterResult = { ok: {}, failed: 0, statusWrites: 0 };
  for (let i = args.seed; Date.now() < args.deadline; i++) {
    const slot = slots[i % slots.length] as string;
    await lockedSlotWrite(slot);
    result.ok[slot] = (result.ok[slot] ?? 0) + 1;
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
  const out =
    args.role === "writer"
      ? await writer(args)
      : args.role === "floor"
        ? await floorWriter(args)
        : await reader(args);
  process.stdout.write(JSON.stringify(out));
}

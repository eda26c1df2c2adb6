import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { basicAuthHeaders } from "../src/edges/opencode-client.ts";
import { processRunning, terminateProcess } from "../src/edges/process-info.ts";
import { recordedCredentials } from "../src/edges/server-auth.ts";
import { UnavailableOpencodeApi } from "../src/edges/unavailable.ts";
import { startLiveness } from "../src/operations/background.ts";
import { parseOptions } from "../src/options.ts";
import { buildContext } from "../src/plugin.ts";
import { type ServerInfo, ServerInfoSchema } from "../src/state/schemas.ts";
import {
  type MockModel,
  OPENCODE_BIN,
  type OpencodeServer,
  startMockModel,
  startOpencode,
  tmux,
  waitFor,
} from "../tests/e2e/harness/index.ts";
import { removeSocketFile } from "../tests/e2e/tmux-socket-file.ts";
import { note } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

interface Spawned {
  agentId: string;
  sessionId: string;
  paneId?: string;
  status: string;
}

const TEAMS_DIR = path.join(".opencode", "opencode-teams");
/** Long enough for the previous pane's `opencode attach` to finish booting. */
const SPACED_PAUSE_MS = 3_000;

/** Run one tool call in the leader's session through the scripted model; its output and how long `execute` took. */
async function callTool<T>(
  server: OpencodeServer,
  sessionId: string,
  tool: string,
  args: unknown,
): Promise<{ output: T; ms: number }> {
  await server.promptAndWait(sessionId, `@@call ${tool} ${JSON.stringify(args)}`, { timeoutMs: 80_000 });
  const result = (await server.toolResults(sessionId, tool)).at(-1);
  if (result?.status !== "completed") throw new Error(`${tool} ${result?.status}: ${result?.error ?? ""}`);
  const time = (result.part.state as { time?: { start: number; end?: number } }).time;
  const ms = time?.end && time.start ? time.end - time.start : Number.NaN;
  return { output: JSON.parse(result.output ?? "null") as T, ms };
}

function serverInfo(projectDir: string): ServerInfo | undefined {
  const file = path.join(projectDir, TEAMS_DIR, "servers");
  try {
    const [hash] = readdirSync(file);
    return ServerInfoSchema.parse(
      JSON.parse(readFileSync(path.join(file, hash ?? "", "server.json"), "utf8")),
    );
  } catch {
    return undefined;
  }
}

/** One spawn-agent call on a warm server; its time goes to `samples`. */
async function warmSpawn(
  server: OpencodeServer,
  leader: string,
  teamName: string,
  samples: number[],
): Promise<Spawned> {
  const next = await callTool<Spawned>(server, leader, "spawn-agent", { teamName, prompt: "@@say hi" });
  if (next.output.status !== "active") throw new Error(`warm spawn: ${JSON.stringify(next.output)}`);
  samples.push(next.ms);
  return next.output;
}

/** Close an agent's pane and make sure its `opencode attach` is gone. */
function killPane(socket: string, agent: Spawned): void {
  const panePid = tmux.listPanes(socket).find((p) => p.paneId === agent.paneId)?.panePid;
  if (agent.paneId) tmux.tmux(socket, ["kill-pane", "-t", agent.paneId]);
  if (panePid && processRunning(panePid)) process.kill(panePid, "SIGKILL");
}

/**
 * 6 and 7b on a real `opencode serve` (hermetic, scripted mock model on 127.0.0.1) and real tmux on a private
 * socket. The plugin runs inside that server; the leader's session calls spawn-agent through the model and the
 * figure is the tool's own execution time as OpenCode records it (call -> agent active, prompt delivered).
 * Cold: a fresh project, so the plugin starts the project's `opencode serve` first. 7b: the spawned agents' panes and
 * attach processes are killed and their sessions deleted; measured until the agent file says inactive.
 */
export async function benchReal(quick: boolean): Promise<Figure[]> {
  const coldRuns = quick ? 1 : 3;
  const warmRuns = quick ? 3 : 10;
  const deleteRuns = quick ? 3 : 5;
  const socket = tmux.tmuxSocketName("otbench");
  const cold: number[] = [];
  const warm: number[] = [];
  const warmSpaced: number[] = [];
  const deleted: number[] = [];
  const ours = new Set<number>();
  let mock: MockModel | undefined;
  const servers: OpencodeServer[] = [];
  try {
    mock = await startMockModel();
    for (let run = 0; run < coldRuns; run++) {
      const main = await startOpencode({
        mockBaseUrl: mock.baseUrl,
        gitInit: true,
        pluginOptions: { tmuxSocket: socket },
        env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
      });
      servers.push(main);
      await main.waitForToolIds(["create-team", "spawn-agent"]);
      const leader = await main.createSession("leader");
      await callTool(main, leader, "create-team", { teamName: "bench" });
      const first = await callTool<Spawned>(main, leader, "spawn-agent", {
        teamName: "bench",
        prompt: "@@say hi",
      });
      if (first.output.status !== "active") throw new Error(`cold spawn: ${JSON.stringify(first.output)}`);
      cold.push(first.ms);
      const info = serverInfo(main.projectDir);
      if (info) ours.add(info.pid);
      note(`spawn: cold ${run + 1}/${coldRuns}: ${first.ms} ms`);
      if (run > 0) continue;

      // Back to back, as a leader spawning a team does: each pane's `opencode attach` is still booting (a core for a
      // second or two) during the next spawn.
      const spawned: Spawned[] = [first.output];
      for (let i = 0; i < warmRuns; i++) spawned.push(await warmSpawn(main, leader, "bench", warm));
      note(`spawn: ${warmRuns} warm back to back`);

      // 7b: this process plays the leader's own OpenCode, with the monitor on the project server's event stream.
      const ctx = buildContext({
        projectRoot: main.projectDir,
        options: parseOptions({ tmuxSocket: socket }),
        log: () => {},
        localServer: new UnavailableOpencodeApi("the bench has no server of its own"),
      });
      const liveness = startLiveness(ctx);
      try {
        await waitFor(() => liveness.monitor.stats.connects >= 1, { timeoutMs: 15_000 });
        if (!info) throw new Error("no ServerInfo after a spawn");
        for (const agent of spawned.slice(0, deleteRuns)) {
          const started = performance.now();
          killPane(socket, agent);
          const response = await fetch(
            `http://127.0.0.1:${info.port}/session/${agent.sessionId}?directory=${encodeURIComponent(main.projectDir)}`,
            {
              method: "DELETE",
              headers: basicAuthHeaders(recordedCredentials(info) ?? {}),
              signal: AbortSignal.timeout(10_000),
            },
          );
          if (!response.ok) throw new Error(`DELETE session: ${response.status}`);
          await waitFor(
            async () => {
              const read = await ctx.store.readAgent("bench", agent.agentId);
              return read.kind === "ok" && read.value.status === "inactive";
            },
            {
              timeoutMs: 30_000,
              intervalMs: 10,
              message: "the deleted agent to become inactive",
            },
          );
          deleted.push((performance.now() - started) / 1000);
        }
      } finally {
        await liveness.release();
      }
      note(`session deleted: ${deleted.length} runs`);

      // Spaced, each after the previous pane has settled, into a second team. The first team's panes go first: an
      // idle `opencode attach` keeps drawing (~4% of a core each here), so with them still up this series would
      // measure how many agents run rather than the pace.
      for (const agent of spawned.slice(deleteRuns)) killPane(socket, agent);
      // A leader session of its own: the first team's leader now gets notices of those panes closing, and a notice
      // landing between a scripted call and the model's turn would take that call's place.
      const spacedLeader = await main.createSession("leader-spaced");
      const team = await callTool<{ success: boolean; error?: string }>(main, spacedLeader, "create-team", {
        teamName: "bench-spaced",
      });
      if (!team.output.success) throw new Error(`create-team bench-spaced: ${team.output.error}`);
      for (let i = 0; i < warmRuns; i++) {
        await Bun.sleep(SPACED_PAUSE_MS);
        await warmSpawn(main, spacedLeader, "bench-spaced", warmSpaced);
      }
      note(`spawn: ${warmRuns} warm, spaced`);
    }
  } finally {
    tmux.killServer(socket);
    removeSocketFile(socket);
    for (const pid of ours) await terminateProcess(pid, 2_000);
    for (const server of servers) await server.stop();
    await mock?.stop();
  }
  return [
    figure(
      "6a",
      "spawn-agent, warm server, call -> active, back to back (agents 2-11 of a team)",
      "ms",
      warm,
      { text: "< 1000 ms", ok: (m) => m < 1000 },
    ),
    figure(
      "6a'",
      `spawn-agent, warm server, call -> active, ${SPACED_PAUSE_MS / 1000} s apart (agents 1-10 of a second team, the first one's panes closed)`,
      "ms",
      warmSpaced,
      { text: "< 1000 ms", ok: (m) => m < 1000 },
    ),
    figure("6b", "spawn-agent, cold (starts opencode serve), call -> active", "ms", cold, {
      text: "< 8000 ms",
      ok: (m) => m < 8000,
    }),
    figure(
      "7b",
      "killed agent whose session is deleted, detected",
      "s",
      deleted,
      { text: "< 20 s", ok: (m) => m < 20 },
      "real server and clock; session.deleted event",
    ),
  ];
}

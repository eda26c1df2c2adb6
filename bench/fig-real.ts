import path from "node:path";
import { pathToFileURL } from "node:url";
import { processRunning, terminateProcess } from "../src/edges/process-info.ts";
import { UnavailableOpencodeApi } from "../src/edges/unavailable.ts";
import type { TeamsContext } from "../src/operations/context.ts";
import { startLiveness } from "../src/operations/liveness/background.ts";
import { parseOptions } from "../src/options.ts";
import { buildContext } from "../src/plugin.ts";
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
import { benchSocket } from "./cleanup.ts";
import { interleaved, together } from "./floors.ts";
import {
  deleteSession,
  FLOOR_SESSION,
  type Project,
  projectOf,
  type Spawned,
  serverInfo,
  tmuxClientEnv,
} from "./hand-spawn.ts";
import { note } from "./setup.ts";
import { type Figure, figure, quantile, zipRounds } from "./stats.ts";

/** The floor of a warm spawn as a tool of the leader's OpenCode, loaded beside the plugin. */
const FLOOR_PLUGIN = pathToFileURL(path.join(import.meta.dir, "floor-plugin.ts")).href;
/** Before each spaced round: the previous round's stopped agent and its pane's processes are gone by then. */
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

/**
 * One spawn by the leader on a warm server, its time into `samples`: spawn-agent, or its floor, the hand-made spawn
 * called by the same leader the same way (`bench-hand-spawn`, floor-plugin.ts).
 */
async function timedSpawn(
  server: OpencodeServer,
  leader: string,
  call: { tool: "spawn-agent" | "bench-hand-spawn"; args: Record<string, unknown> },
  samples: number[],
): Promise<Spawned> {
  const done = await callTool<Spawned>(server, leader, call.tool, call.args);
  if (done.output.status !== "active") throw new Error(`${call.tool}: ${JSON.stringify(done.output)}`);
  samples.push(done.ms);
  return done.output;
}

/** spawn-agent's arguments for a warm spawn into `teamName`. */
function spawnCall(teamName: string) {
  return { tool: "spawn-agent" as const, args: { teamName, prompt: "@@say hi" } };
}

/** kill-agent, called by the agent's leader: its pane, attach process and session go, its file says terminated. */
async function stopAgent(
  server: OpencodeServer,
  leader: string,
  teamName: string,
  agent: Spawned,
): Promise<void> {
  const args = { teamName, agentId: agent.agentId, force: true };
  const killed = await callTool<{ success: boolean; error?: string }>(server, leader, "kill-agent", args);
  if (!killed.output.success) throw new Error(`kill-agent: ${killed.output.error}`);
}

/** Close an agent's pane and make sure its `opencode attach` is gone. */
function killPane(socket: string, agent: Spawned): void {
  const panePid = tmux.listPanes(socket).find((p) => p.paneId === agent.paneId)?.panePid;
  if (agent.paneId) tmux.tmux(socket, ["kill-pane", "-t", agent.paneId]);
  if (panePid && processRunning(panePid)) process.kill(panePid, "SIGKILL");
}

/** The floor session, made once before any floor is timed: a window that stays, so the session outlives the hand-made panes. */
function floorSession(socket: string): void {
  if (tmux.tmux(socket, ["has-session", "-t", `=${FLOOR_SESSION}`]).code === 0) return;
  const made = tmux.tmux(socket, [
    "new-session",
    "-d",
    "-s",
    FLOOR_SESSION,
    "-x",
    "200",
    "-y",
    "50",
    "sleep 86400",
  ]);
  if (made.code !== 0) throw new Error(`floor session: ${made.stderr}`);
}

/** What a series does with each agent once its round is timed (nothing: it stays up). */
interface AfterRound {
  spawned?: (agent: Spawned) => Promise<void>;
  hand?: (agent: Spawned) => Promise<void>;
}

/** How a series pairs a spawn with a hand-made one: by turns, each after a pause of its own, or both at once. */
type Pace = { turnsPauseMs: number } | "together";

/** Spawn and hand-spawn `runs` times, paced so; the spawned agents, and the hand-made ones to close later. */
async function spawnSeries(
  runs: number,
  pace: Pace,
  spawn: () => Promise<Spawned>,
  hand: () => Promise<Spawned>,
  after: AfterRound = {},
): Promise<{ spawned: Spawned[]; hand: Spawned[] }> {
  const out = { spawned: [] as Spawned[], hand: [] as Spawned[] };
  const pause = pace === "together" ? 0 : pace.turnsPauseMs;
  const round =
    (make: () => Promise<Spawned>, made: Spawned[], then?: (agent: Spawned) => Promise<void>) => async () => {
      await Bun.sleep(pause);
      const agent = await make();
      made.push(agent);
      await then?.(agent);
    };
  const rounds = [round(spawn, out.spawned, after.spawned), round(hand, out.hand, after.hand)] as const;
  await (pace === "together" ? together(runs, ...rounds) : interleaved(runs, ...rounds));
  return out;
}

/** A `tmux wait-for` client that returns once tmux has noticed that one pane's process died. */
type PaneExitWaiter = ReturnType<typeof Bun.spawn>;

/**
 * Arm tmux's own notice of `agent`'s pane dying: a pane-exited hook that signals a `tmux wait-for` channel, for that
 * pane only (the figure's pane dies at the same moment), and the waiter, connected by the time this returns.
 */
async function paneExitWaiter(socket: string, agent: Spawned, round: string): Promise<PaneExitWaiter> {
  // One channel per round: a pane of the floor session closing later signals the channel last hooked, not this one.
  const channel = `floor-died-${round}`;
  // A global hook: tmux runs pane-exited once the pane and its window are gone, and then looks the hook up in the
  // session it deems current (the one last active, here a team's), not the pane's own.
  const onlyThisPane = `if -F '#{==:#{hook_pane},${agent.paneId}}' 'wait-for -S ${channel}'`;
  const hook = tmux.tmux(socket, ["set-hook", "-g", "pane-exited", onlyThisPane]);
  if (hook.code !== 0) throw new Error(`set-hook: ${hook.stderr}`);
  const waiter = Bun.spawn(["tmux", "-L", socket, "wait-for", channel], {
    env: tmuxClientEnv(),
    stdout: "ignore",
    stderr: "ignore",
  });
  // Let the waiter connect before the kill, so the notice is timed and not the waiter's start.
  await Bun.sleep(200);
  return waiter;
}

/**
 * The floor of 7b: the same kill and DELETE as the figure, on a hand-spawned agent (a session that got the same prompt,
 * with `opencode attach` in a pane: OpenCode deletes such a session more slowly than an empty one), the DELETE sent at
 * once as in the figure, while tmux's own notice of the pane's death (`waiter`, paneExitWaiter) is awaited beside it:
 * the earliest anyone can know of both is when the DELETE has been answered and tmux has noticed. Returns that whole
 * and the notice alone, in seconds.
 */
async function deathFloor(
  project: Project,
  socket: string,
  agent: Spawned,
  waiter: PaneExitWaiter,
): Promise<{ whole: number; notice: number }> {
  const started = performance.now();
  const panePid = tmux.listPanes(socket).find((p) => p.paneId === agent.paneId)?.panePid;
  if (!panePid) throw new Error(`the hand-made pane ${agent.paneId} is gone before its kill`);
  process.kill(panePid, "SIGKILL");
  const deleted = deleteSession(project, agent.sessionId);
  // Awaited below, after the notice; a failure meanwhile must not count as unhandled (Bun exits on one).
  deleted.catch(() => {});
  const noticed = await Promise.race([
    waiter.exited.then(() => performance.now() - started),
    Bun.sleep(10_000).then(() => undefined),
  ]);
  if (noticed === undefined) {
    waiter.kill();
    throw new Error("tmux gave no pane-exited notice within 10 s");
  }
  await deleted;
  return { whole: (performance.now() - started) / 1000, notice: noticed / 1000 };
}

/**
 * The floor of 6b, timed right before each cold spawn, in the same conditions (the earlier runs' servers and panes
 * still up): an `opencode serve` of its own, with this plugin, to healthy, and then to its project instance loaded.
 * Healthy is not ready: the first request naming the project directory boots OpenCode's instance for it (the plugins
 * load then), and a cold spawn's first session pays for that on the project server too.
 */
async function serveFloor(mockBaseUrl: string, socket: string, out: RealSamples): Promise<void> {
  const bare = await startOpencode({ mockBaseUrl, gitInit: true, pluginOptions: { tmuxSocket: socket } });
  try {
    out.serveStart.push(bare.startupMs);
    const booting = performance.now();
    await bare.waitForToolIds(["create-team", "spawn-agent"], { intervalMs: 20 });
    out.serveReady.push(bare.startupMs + performance.now() - booting);
  } finally {
    await bare.stop();
  }
}

/** Samples of group 6/7b and their floors. */
interface RealSamples {
  cold: number[];
  serveStart: number[];
  /** serveStart and then the project's instance loaded (the first request naming the directory). */
  serveReady: number[];
  warm: number[];
  warmFloor: number[];
  warmSpaced: number[];
  warmSpacedFloor: number[];
  deleted: number[];
  deletedFloor: number[];
  deathNotice: number[];
}

/**
 * 7b's monitor: this process plays the leader's own OpenCode, with the liveness loop (and its monitor on the project
 * server's event stream) running while `run` kills agents.
 */
async function withMonitor(main: OpencodeServer, socket: string, run: (ctx: TeamsContext) => Promise<void>) {
  const ctx = buildContext({
    projectRoot: main.projectDir,
    options: parseOptions({ tmuxSocket: socket }),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the bench has no server of its own"),
  });
  const liveness = startLiveness(ctx);
  try {
    await waitFor(() => liveness.monitor.stats.connects >= 1, { timeoutMs: 15_000 });
    await run(ctx);
  } finally {
    await liveness.release();
  }
}

/** One batch's agents for 7b: those spawn-agent made into `teamName`, and the hand-made ones. */
interface Victims {
  teamName: string;
  batch: number;
  agents: readonly Spawned[];
  hand: readonly Spawned[];
}

/** 7b's round: the agent's pane killed and its session deleted, until its file says inactive; in seconds. */
async function killedDetected(
  ctx: TeamsContext,
  project: Project,
  socket: string,
  teamName: string,
  agent: Spawned,
): Promise<number> {
  const started = performance.now();
  killPane(socket, agent);
  await deleteSession(project, agent.sessionId);
  await waitFor(
    async () => {
      const read = await ctx.store.readAgent(teamName, agent.agentId);
      return read.kind === "ok" && read.value.status === "inactive";
    },
    { timeoutMs: 30_000, intervalMs: 10, message: "the deleted agent to become inactive" },
  );
  return (performance.now() - started) / 1000;
}

/**
 * 7b on one batch: each agent killed and its session deleted at the same moment as a hand-made one (deathFloor), so
 * both meet the same panes booting and the same server.
 */
async function detectDeleted(
  ctx: TeamsContext,
  project: () => Project,
  socket: string,
  victims: Victims,
  out: RealSamples,
): Promise<void> {
  const { agents, hand, teamName } = victims;
  for (let n = 0; n < agents.length; n++) {
    const handMade = hand[n] as Spawned;
    const waiter = await paneExitWaiter(socket, handMade, `${victims.batch}-${n}`);
    // The floor's kill and DELETE go first (as in `together`): where the server answers the second DELETE later,
    // the wait is the figure's.
    const [floor, detected] = await Promise.all([
      deathFloor(project(), socket, handMade, waiter),
      killedDetected(ctx, project(), socket, teamName, agents[n] as Spawned),
    ]);
    out.deleted.push(detected);
    out.deletedFloor.push(floor.whole);
    out.deathNotice.push(floor.notice);
  }
}

/** A leader session of its own and its team: earlier teams' leaders get notices of their panes closing, and a
 * notice landing between a scripted call and the model's turn would take that call's place. */
async function newTeam(main: OpencodeServer, title: string, teamName: string): Promise<string> {
  const leader = await main.createSession(title);
  const team = await callTool<{ success: boolean; error?: string }>(main, leader, "create-team", {
    teamName,
  });
  if (!team.output.success) throw new Error(`create-team ${teamName}: ${team.output.error}`);
  return leader;
}

/**
 * Back to back in batches, each into a team of its own whose agents 7b then kills: a batch's spawns meet the earlier
 * ones' `opencode attach` still booting, as a leader spawning a team does, but not twenty idle panes (about a tenth of
 * a core each): with ten pairs in one team, 6a's and 7b's rounds ran 0.5x-11x and 0.3x-6x and the group's load went
 * above its allowance in three runs of four. Each spawn-agent call and its floor start at the same moment (from two
 * leaders), and so do 7b's kills: taken by turns, each side met the other's pane at another point of its boot, a
 * pair's ratio strayed over 1.6x-4.9x (6a) and 0.8x-2.9x (7b) between quartiles within a run, and two runs' medians
 * of 6a came up to 55% apart with sixteen batches (80 pairs).
 */
function warmShape(quick: boolean): { batches: number; perBatch: number } {
  return quick ? { batches: 1, perBatch: 3 } : { batches: 16, perBatch: 5 };
}

/** The first (cold) run's follow-up: 6a and 7b in batches, then the spaced series (6a'). */
async function warmRuns(
  main: OpencodeServer,
  first: Spawned,
  socket: string,
  quick: boolean,
  out: RealSamples,
): Promise<void> {
  const { batches, perBatch } = warmShape(quick);
  // Spaced rounds leave no pane up and cost ~7 s a pair. They go in four parts spread over the batches' ten minutes
  // (before the batches, after a third and two thirds of them, and after them), so that no stretch of the machine
  // meets them all: in two halves of sixteen, before and after the batches, 6a' ranged 2.50x-3.32x over nine runs and
  // two runs back to back came 33% apart (spawn-agent 331 / 262 ms, floor 105 / 101 ms) where the whole group ran
  // slower in one of them. 48 pairs instead of 32 also narrow the median's own sampling wobble by about a fifth.
  const spacedPerPart = quick ? 1 : 12;
  const spacedBefore = new Set([0, Math.floor(batches / 3), Math.floor((2 * batches) / 3)]);
  const info = serverInfo(main.projectDir);
  if (!info) throw new Error("no ServerInfo after a spawn");
  const project = projectOf(info, main.projectDir);
  floorSession(socket);
  let n = 0;
  // The server as the plugin last recorded it: when it had to start the project's server again, on another port,
  // the hand-made spawns follow it there.
  const current = (): Project => {
    const now = serverInfo(main.projectDir);
    return now ? projectOf(now, main.projectDir) : project;
  };
  // The floor tool reads the server the plugin last recorded on each call, as spawn-agent does.
  const hand = (by: string, samples: number[]) => () =>
    timedSpawn(main, by, { tool: "bench-hand-spawn", args: { title: `floor-${n++}` } }, samples);
  // Spaced, into a team of its own, each on a machine with no pane booting: each round's agent is stopped once it is
  // timed. An `opencode attach` took 1.2-1.9 CPU-seconds in its first two seconds here and about a tenth of a core
  // after that, so with panes left up this series would measure how many agents run rather than a spawn.
  const spacedLeader = await newTeam(main, "leader-spaced", "bench-spaced");
  const spaced = () =>
    spawnSeries(
      spacedPerPart,
      { turnsPauseMs: SPACED_PAUSE_MS },
      () => timedSpawn(main, spacedLeader, spawnCall("bench-spaced"), out.warmSpaced),
      hand(spacedLeader, out.warmSpacedFloor),
      {
        spawned: (agent) => stopAgent(main, spacedLeader, "bench-spaced", agent),
        hand: async (agent) => killPane(socket, agent),
      },
    );
  // The cold spawn's team is done with (its leader calls nothing more).
  killPane(socket, first);
  await withMonitor(main, socket, async (ctx) => {
    for (let batch = 0; batch < batches; batch++) {
      if (spacedBefore.has(batch)) await spaced();
      const teamName = `bench-${batch + 1}`;
      const batchLeader = await newTeam(main, `leader-${batch + 1}`, teamName);
      // The hand-made spawns come from a leader of their own, so that both calls of a pair run at once.
      const handLeader = await main.createSession(`hand-leader-${batch + 1}`);
      const made = await spawnSeries(
        perBatch,
        "together",
        () => timedSpawn(main, batchLeader, spawnCall(teamName), out.warm),
        hand(handLeader, out.warmFloor),
      );
      await detectDeleted(
        ctx,
        current,
        socket,
        { teamName, batch, agents: made.spawned, hand: made.hand },
        out,
      );
    }
  });
  note(
    `spawn: ${batches} teams of ${perBatch} warm back to back, as many by hand; each killed and deleted (7b)`,
  );

  await spaced();
  note(
    `spawn: ${spacedPerPart} warm, spaced, and as many by hand, in each of ${spacedBefore.size + 1} parts spread over the batches`,
  );
  note(`spawn steps, median ms of the warm spawns (from the plugin's log): ${spawnStepMedians(main)}`);
}

/**
 * Where the warm spawns spent their time: each spawn logs its per-step durations (`timingsMs.<step>=<ms>`); the
 * first, cold spawn is left out.
 */
function spawnStepMedians(main: OpencodeServer): string {
  const byStep = new Map<string, number[]>();
  const lines = main
    .logTail(50_000)
    .split("\n")
    .filter((line) => / spawned into /.test(line));
  for (const line of lines.slice(1)) {
    for (const [, step, ms] of line.matchAll(/timingsMs\.([\w-]+)=(\d+)/g)) {
      if (step && ms) byStep.set(step, [...(byStep.get(step) ?? []), Number(ms)]);
    }
  }
  return [...byStep].map(([step, samples]) => `${step} ${quantile(samples, 0.5).toFixed(0)}`).join(", ");
}

/**
 * 6 and 7b on a real `opencode serve` (hermetic, scripted mock model on 127.0.0.1) and real tmux on a private
 * socket. The plugin runs inside that server; the leader's session calls spawn-agent through the model and the
 * figure is the tool's own execution time as OpenCode records it (call -> agent active, prompt delivered).
 * Cold: a fresh project, so the plugin starts the project's `opencode serve` first; its floor is the same server
 * start to healthy and then to its project instance loaded (what the spawn's first session waits for), timed on an
 * `opencode serve` of its own (same binary, this plugin) right before (serveFloor). Warm: floor by hand
 * (hand-spawn.ts), as a tool the same leader calls the same way (floor-plugin.ts), so both run inside a leader's turn
 * in the same process and are timed by OpenCode alike. 7b: the back-to-back agents' panes and attach processes are killed
 * and their sessions deleted; measured until the agent file says inactive; floor: deathFloor.
 */
export async function benchReal(quick: boolean): Promise<Figure[]> {
  // A cold spawn's ratio swings with the load of the moment (the earlier runs' servers and first agents stay up): five pairs.
  const coldRuns = quick ? 1 : 5;
  const socket = benchSocket();
  const out: RealSamples = {
    cold: [],
    serveStart: [],
    serveReady: [],
    warm: [],
    warmFloor: [],
    warmSpaced: [],
    warmSpacedFloor: [],
    deleted: [],
    deletedFloor: [],
    deathNotice: [],
  };
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
        extraPlugins: [[FLOOR_PLUGIN, { tmuxSocket: socket, opencodeBin: OPENCODE_BIN }]],
        env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
      });
      servers.push(main);
      await main.waitForToolIds(["create-team", "spawn-agent", "bench-hand-spawn"], { intervalMs: 20 });
      const leader = await main.createSession("leader");
      await callTool(main, leader, "create-team", { teamName: "bench" });
      await serveFloor(mock.baseUrl, socket, out);
      const first = await callTool<Spawned>(main, leader, "spawn-agent", {
        teamName: "bench",
        prompt: "@@say hi",
      });
      if (first.output.status !== "active") throw new Error(`cold spawn: ${JSON.stringify(first.output)}`);
      out.cold.push(first.ms);
      const info = serverInfo(main.projectDir);
      if (info) ours.add(info.pid);
      note(
        `spawn: cold ${run + 1}/${coldRuns}: ${first.ms} ms (floor: serve start ${out.serveStart.at(-1)} ms, ready ${out.serveReady.at(-1)?.toFixed(0)} ms)`,
      );
      if (run === 0) await warmRuns(main, first.output, socket, quick, out);
    }
  } finally {
    tmux.killServer(socket);
    removeSocketFile(socket);
    for (const pid of ours) await terminateProcess(pid, 2_000);
    for (const server of servers) await server.stop();
    await mock?.stop();
  }
  return realFigures(out, quick);
}

/**
 * Targets. Warm spawns 2x: on top of the three steps done by hand, spawn-agent proves the prompt landed (the session's
 * messages), writes the agent file durably and waits the short settle that tells a running `opencode attach` from a
 * binary that exits at once; none of it should cost as much as the steps themselves. Cold 1.3x: a cold spawn is a
 * server start and then a warm spawn, which is short beside the start. 7b 2x: beyond the kill, the DELETE answered
 * and tmux's own notice, the detection takes the server's session.deleted event to the monitor and one durable write
 * of the agent file (and the bench looks every 10 ms).
 */
function realFigures(out: RealSamples, quick: boolean): Figure[] {
  const shape = warmShape(quick);
  const handFloor =
    "POST /session + prompt_async + tmux pane with opencode attach, by hand, as a tool of the same leader";
  return [
    figure(
      "6a",
      "spawn, warm, back to back",
      "ms",
      out.warm,
      {
        floor: {
          what: handFloor,
          samples: out.warmFloor,
          maxRatio: 2,
          pairs: zipRounds(out.warm, out.warmFloor),
        },
      },
      `spawn-agent on a warm server, call -> active, ${shape.batches} teams of ${shape.perBatch} agents, each spawned as the last one boots, its floor at the same moment; moves with the machine's load`,
    ),
    figure(
      "6a'",
      `spawn, warm, ${SPACED_PAUSE_MS / 1000} s apart`,
      "ms",
      out.warmSpaced,
      {
        floor: {
          what: handFloor,
          samples: out.warmSpacedFloor,
          maxRatio: 2,
          pairs: zipRounds(out.warmSpaced, out.warmSpacedFloor),
        },
      },
      "spawn-agent on a warm server, call -> active, no other pane booting (a second team; each agent stopped after its round); moves with the machine's load",
    ),
    figure(
      "6b",
      "spawn, cold (starts the server)",
      "ms",
      out.cold,
      {
        floor: {
          what: "opencode serve to healthy, then its project instance loaded",
          samples: out.serveReady,
          maxRatio: 1.3,
          also: { what: "to healthy alone", samples: out.serveStart },
          // Each cold spawn beside the server start timed just before it (serveFloor).
          pairs: zipRounds(out.cold, out.serveReady),
        },
      },
      "spawn-agent that starts the project's opencode serve, call -> active; moves with the machine's load",
    ),
    figure(
      "7b",
      "killed + session deleted, seen",
      "s",
      out.deleted,
      {
        floor: {
          what: "same kill + DELETE of a hand-spawned agent at the same moment, until answered and tmux pane-exited hook to wait-for",
          samples: out.deletedFloor,
          maxRatio: 2,
          also: { what: "the hook's notice alone", samples: out.deathNotice },
          pairs: zipRounds(out.deleted, out.deletedFloor),
        },
      },
      "killed agent whose session is deleted, detected; real server and clock; session.deleted event",
    ),
  ];
}

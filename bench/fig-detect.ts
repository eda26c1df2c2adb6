import { TmuxCli } from "../src/edges/tmux.ts";
import { StaleSweeper } from "../src/operations/liveness/sweep.ts";
import { tmux } from "../tests/e2e/harness/index.ts";
import { removeSocketFile } from "../tests/e2e/tmux-socket-file.ts";
import { makeTestContext } from "../tests/helpers/context.ts";
import { benchSocket } from "./cleanup.ts";
import { leaderSession, note, seedTeam } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

/** A pseudo-random sequence, so the phases are the same on every run of the bench. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/**
 * Kill the agent's pane and process, then wait (real time, up to 2 s) until tmux no longer lists the pane. Simulated
 * time puts seconds between the kill and the next sweep, which real time here does not; a sweep run the moment after
 * the kill, while tmux was still taking the pane (and its server, whose last pane it was) down, sometimes saw nothing
 * yet and declared the agent one sweep late.
 */
async function killAgent(socket: string, paneId: string, pid: number): Promise<void> {
  tmux.tmux(socket, ["kill-pane", "-t", paneId]);
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // the pane took it down already
  }
  const deadline = Date.now() + 2_000;
  while (Date.now() < deadline) {
    const listed = tmux.tmux(socket, ["list-panes", "-a", "-F", "#{pane_id}"]);
    if (/no server running|error connecting/i.test(listed.stderr)) return;
    if (listed.code === 0 && !listed.stdout.split("\n").includes(paneId)) return;
    await Bun.sleep(10);
  }
}

/**
 * 7a. A killed agent with the default timings, on an injected clock: the real sweep runs every 15 s and the real pane
 * watch every 1 s of simulated time (random phases) against real tmux on a private socket, where the agent's pane and
 * the process in it are killed 0-30 s after its last heartbeat. Measured: simulated time from the kill until a sweep
 * declared it inactive. Floor: simulated time from the kill to the first watch tick or sweep after it, the earliest
 * the pane can be seen gone. Target 1x: that tick declares it. Simulated time does not depend on the machine's load.
 */
export async function benchDetectDefault(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 5 : 20;
  const socket = benchSocket();
  const next = random(7);
  const samples: number[] = [];
  const floor: number[] = [];
  const causes = new Set<string>();
  try {
    for (let run = 0; run < runs; run++) {
      const ctx = await makeTestContext();
      try {
        ctx.edges.tmux = new TmuxCli();
        const created = tmux.tmux(socket, [
          "new-session",
          "-d",
          "-s",
          `det${run}`,
          "-P",
          "-F",
          "#{pane_id} #{pane_pid}",
          "sleep 3600",
        ]);
        const [paneId = "", pid = "0"] = created.stdout.trim().split(" ");
        if (created.code !== 0 || !paneId) throw new Error(`tmux new-session failed: ${created.stderr}`);
        const team = await seedTeam(ctx, "det", 1, () => ({
          paneId,
          attachPid: Number(pid),
          tmux: { socket, session: `det${run}`, window: "0" },
          headless: false,
        }));
        const agent = team.agents[0];
        if (!agent) throw new Error("no agent");
        // As spawn marks it: a pane without the agent's @agent_id is not the agent's, and the sweep says so at once.
        tmux.tmux(socket, ["set-option", "-p", "-t", paneId, "@agent_id", agent.agentId]);
        ctx.server.addSession({ id: agent.sessionId });
        ctx.local.addSession({ id: leaderSession("det") });
        const sweeper = new StaleSweeper(ctx);
        // Heartbeat at t0, killed 0-30 s later; the sweep (random phase) had seen the agent before t0.
        const t0 = ctx.clock.now();
        const killAt = t0 + next() * 30_000;
        // The background loop: sweeps every 15 s and pane watch ticks every 1 s, each at a random phase.
        let sweepAt = t0 - next() * ctx.options.sweepIntervalMs;
        let watchAt = t0 - next() * ctx.options.paneWatchMs;
        let killed = false;
        let detectedAt: number | undefined;
        for (let i = 0; i < 200 && detectedAt === undefined; i++) {
          const isSweep = sweepAt <= watchAt;
          const at = isSweep ? sweepAt : watchAt;
          if (!killed && at >= killAt) {
            killed = true;
            floor.push((at - killAt) / 1000);
            await killAgent(socket, paneId, Number(pid));
          }
          ctx.clock.set(at);
          if (isSweep || (await sweeper.needsSweep())) {
            const report = await sweeper.sweep();
            for (const dead of report.inactive) causes.add(dead.cause);
            if (report.inactive.length > 0) detectedAt = at;
          }
          if (isSweep) sweepAt += ctx.options.sweepIntervalMs;
          else watchAt += ctx.options.paneWatchMs;
        }
        if (!killed || detectedAt === undefined)
          throw new Error("the killed agent was never declared inactive");
        if (detectedAt < killAt) throw new Error("declared inactive before it was killed");
        samples.push((detectedAt - killAt) / 1000);
      } finally {
        await ctx.cleanup();
      }
    }
  } finally {
    tmux.killServer(socket);
    removeSocketFile(socket);
  }
  note(`detect (default timings, injected clock): ${runs} runs`);
  return [
    figure(
      "7a",
      "killed agent seen, default timings",
      "s",
      samples,
      {
        floor: { what: "the first watch tick or sweep after the kill", samples: floor, maxRatio: 1 },
        loadFree: true,
      },
      `pane + process killed; injected clock: real sweep + pane watch + real tmux, simulated 15 s sweeps and 1 s watch ticks; cause ${[...causes].join("/")}; from the kill`,
    ),
  ];
}

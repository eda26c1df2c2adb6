/**
 * The README's scenario end to end, through `npm run demo`'s own code (scripts/demo.ts runDemo, scripted model), so the
 * demo cannot rot: a real leader-side `opencode serve` with the plugin, the project server the plugin starts, real
 * tmux panes on a private socket running `opencode attach`, scripted workers. Assertions are on tool results and
 * state files the scenario recorded at each step (scripts/scenario.ts), and on what is left running afterwards.
 */
import { afterAll, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { type DemoRun, runDemo } from "../../scripts/demo.ts";
import { SCRIPTED_TIMING, type ScenarioEnv } from "../../scripts/scenario.ts";
import { processRunning } from "../../src/edges/process-info.ts";
import { tmux, waitFor } from "./harness/index.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const socket = tmux.tmuxSocketName("oct-scenario");
let env: ScenarioEnv | undefined;
afterAll(async () => {
  // Only does anything when the test failed before the demo's own clean-up.
  await env?.stop();
});

interface StatusAgent {
  agentId: string;
  name: string;
  status: string;
  heartbeatHealthy: boolean;
}

test("leader, two workers, a crash, a resume, two completions: the whole product on real OpenCode and tmux", async () => {
  const printed: string[] = [];
  const run: DemoRun = await runDemo(
    { socket, keep: false, pauseMs: 0, color: false, print: (line) => printed.push(line) },
    (started) => {
      env = started;
    },
  );
  const r = run.record;
  const [w1, w2] = r.spawned;
  const [task1, task2] = r.taskIds;
  console.error(
    `[scenario e2e] scenario ${r.durationMs} ms; inactive ${r.killed.inactiveAt - r.killed.killedAt} ms after the kill`,
  );

  // The demo says what it is and how to watch it.
  expect(printed.join("\n")).toContain("MODEL: SCRIPTED");
  expect(printed).toContainEqual(expect.stringContaining(`tmux -L ${socket} attach -t teams-demo`));
  expect(r.attachCommand).toBe(`tmux -L ${socket} attach -t teams-demo`);

  // Two tasks, two workers in panes of the private tmux server.
  expect([task1, task2]).toEqual(["task-1", "task-2"]);
  for (const [w, name] of [
    [w1, "worker-1"],
    [w2, "worker-2"],
  ] as const) {
    expect(w).toMatchObject({ success: true, name, status: "active", promptDelivery: "sdk" });
    expect(w.paneId).toMatch(/^%\d+$/);
  }
  expect(w1.sessionId).not.toBe(w2.sessionId);

  // Both claimed and heartbeat: healthy in get-agent-status and list-agents.
  const statusAgents = r.healthy.status.agents as StatusAgent[];
  expect(r.healthy.status.success).toBe(true);
  for (const w of [w1, w2]) {
    expect(statusAgents.find((a) => a.agentId === w.agentId)).toMatchObject({
      status: "active",
      heartbeatHealthy: true,
    });
  }
  const listed = r.healthy.list.agents as {
    agent_id: string;
    health_status: string;
    lifecycle_status: string;
  }[];
  expect(r.healthy.list.success).toBe(true);
  for (const w of [w1, w2]) {
    expect(listed.find((a) => a.agent_id === w.agentId)).toMatchObject({
      health_status: "healthy",
      lifecycle_status: "active",
    });
  }

  // The leader steered the busy worker-2: queued, read on its next step, and followed (its report says so).
  expect(r.steered.result).toMatchObject({
    success: true,
    deliveries: [{ name: "worker-2", delivery: "queued" }],
  });
  expect(r.steered.completionNotice?.text).toContain(
    "Report from worker-2:\n> Steered by the leader: ran the tests",
  );

  // worker-1's pane and process die; within the window it is inactive, its task pending and unowned.
  expect(r.killed.attachRunningAfterKill).toBe(false);
  expect(r.killed.paneListedAfterKill).toBe(false);
  // The fast path: the next sweep finds the pane gone, long before the heartbeat could go stale (slack for a loaded
  // machine, still well under the stale threshold).
  expect(r.killed.inactiveAt - r.killed.killedAt).toBeLessThan(
    Math.min(SCRIPTED_TIMING.staleThresholdMs, 4 * SCRIPTED_TIMING.sweepIntervalMs + 8_000),
  );
  expect(r.killed.agent).toMatchObject({ agentId: w1.agentId, status: "inactive" });
  expect(r.killed.agent.statusReason).toBe(`its tmux pane ${w1.paneId} is gone`);
  const t1 = r.killed.tasks.tasks.find((t) => t.id === task1);
  expect(t1).toMatchObject({ status: "pending", assignee: null });
  expect(t1?.reassignedReason).toBeString();
  expect(r.killed.tasks.tasks.find((t) => t.id === task2)).toMatchObject({
    status: "in_progress",
    assignee: w2.agentId,
  });
  // The leader got the notice: in its inbox, delivered, and in its OpenCode session.
  const notice = `Agent worker-1 (${w1.agentId}) became inactive: its tmux pane ${w1.paneId} is gone. Tasks returned to pending: ${task1}.`;
  const inboxNotice = r.killed.leaderInbox.find((m) => m.type === "agent_inactive");
  expect(inboxNotice).toMatchObject({
    text: notice,
    data: { agents: [{ cause: "pane_gone", tasks: [task1] }] },
  });
  expect(inboxNotice?.deliveredAt).toBeString();
  // Under the notice header (`[notice from opencode-teams via team …, id …]`, see specs/heartbeat.md).
  expect(r.killed.leaderSessionTexts.filter((text) => text.endsWith(`\n${notice}`))).toHaveLength(1);
  expect(r.killed.history.entries.find((e) => e.agent_id === w1.agentId)).toMatchObject({
    status: "interrupted",
  });

  // resume-agent: a new record on the old session, in a new pane; the conversation goes on.
  const resumed = r.resumed.result;
  expect(resumed).toMatchObject({
    success: true,
    resumedFrom: w1.agentId,
    name: "worker-1",
    sessionId: w1.sessionId,
    sessionReused: true,
    status: "active",
    promptDelivery: "sdk",
  });
  expect(resumed.agentId).not.toBe(w1.agentId);
  expect(resumed.paneId).toMatch(/^%\d+$/);
  expect(resumed.paneId).not.toBe(w1.paneId);
  expect(r.resumed.sessionUserTexts).toHaveLength(2);
  expect(r.resumed.sessionUserTexts[0]).toStartWith(`${task1} (Write the parser), as worker-1`);
  expect(r.resumed.sessionUserTexts[1]).toContain("You were interrupted and are resumed");
  expect(r.resumed.sessionTools).toEqual(["update-task", "heartbeat", "update-task", "heartbeat"]);
  expect(r.resumed.tasks.tasks.find((t) => t.id === task1)).toMatchObject({
    status: "in_progress",
    assignee: resumed.agentId,
  });

  // Both workers report completion themselves and see the tool's answer.
  for (const [name, agentId] of [
    ["worker-2", w2.agentId],
    ["worker-1", resumed.agentId],
  ] as const) {
    expect(r.completed.results[name]).toEqual({
      status: "completed",
      output: {
        success: true,
        agentId,
        name,
        status: "completed",
        reassignedTasks: [],
        paneClosed: true,
        message: "Recorded. Your work is done: end your turn now without further tool calls.",
      },
    });
    expect(r.completed.agents[name]).toMatchObject({ status: "terminated", outcome: "completed" });
  }

  // worker-3 ran on a budget of $0.10 (the scripted model is priced at $0.02 a call): the leader was told at 80% and
  // at 100%, and it was stopped within one model call of it.
  const budget = r.budget;
  if (!budget) throw new Error("the scripted scenario stops worker-3 by its budget");
  expect(budget.agent).toMatchObject({ status: "terminated", outcome: "budget" });
  expect(budget.spentUsd).toBeGreaterThanOrEqual(0.1);
  expect(budget.spentUsd).toBeLessThanOrEqual(0.12 + 1e-9);
  expect(budget.notices.some((text) => text.includes("80% of its budget"))).toBe(true);
  expect(budget.notices.some((text) => text.includes("was stopped"))).toBe(true);

  // Final state, exactly (the leader and the reviewer are active or idle depending on whether a turn still runs).
  const finalAgents = (r.final.status.agents as StatusAgent[]).map(({ agentId, name, status }) => ({
    agentId,
    name,
    status:
      (name === "leader" || name === "reviewer-1") && (status === "active" || status === "idle")
        ? "live"
        : status,
  }));
  const leaderId = finalAgents.find((a) => a.name === "leader")?.agentId;
  expect(new Set(finalAgents.map((a) => JSON.stringify(a)))).toEqual(
    new Set(
      [
        { agentId: leaderId, name: "leader", status: "live" },
        { agentId: w1.agentId, name: "worker-1", status: "terminated" },
        { agentId: w2.agentId, name: "worker-2", status: "terminated" },
        { agentId: resumed.agentId, name: "worker-1", status: "terminated" },
        { agentId: budget.agentId, name: "worker-3", status: "terminated" },
        { agentId: r.reviewer.agentId, name: "reviewer-1", status: "live" },
      ].map((a) => JSON.stringify(a)),
    ),
  );
  expect(r.final.status.summary).toMatchObject({ total: 6, inactive: 0, shuttingDown: 0, terminated: 4 });
  // Every ended worker's usage is counted; the team's total is the sum of its runs.
  const usage = r.final.status.agents as { name: string; usage: { cost_usd: number | null } }[];
  for (const a of usage.filter((u) => u.name !== "leader" && u.name !== "reviewer-1"))
    expect(a.usage.cost_usd).toBeGreaterThan(0);
  const outcomes = Object.fromEntries(r.final.agents.map((a) => [a.agentId, [a.status, a.outcome ?? null]]));
  expect(outcomes).toEqual({
    [leaderId ?? ""]: [expect.any(String), null],
    [w1.agentId]: ["terminated", "interrupted"],
    [w2.agentId]: ["terminated", "completed"],
    [resumed.agentId]: ["terminated", "completed"],
    [budget.agentId]: ["terminated", "budget"],
    [r.reviewer.agentId]: [expect.any(String), null],
  });
  // The review, planned to wait for both, is ready once both are done (the leader was told so) and the reviewer
  // spawned then took it with claim-task.
  expect(r.final.tasks.tasks.map((t) => [t.id, t.status, t.blockedBy])).toEqual([
    [task1, "completed", []],
    [task2, "completed", []],
    ["task-3", "in_progress", [task1, task2]],
  ]);
  expect(r.final.tasks.tasks[2]?.assignee).toBe(r.reviewer.agentId);
  expect(r.final.readyNotice).toContain(
    'Tasks now ready after worker-1\'s update: task-3 "Review the parser and its tests"',
  );
  const entries = r.final.history.entries as Record<string, unknown>[];
  expect(r.final.history).toMatchObject({ success: true, total: 5 });
  expect(entries.map((e) => [e.agent_id, e.name, e.status, e.resumes ?? null, e.resumed_by ?? null])).toEqual(
    [
      [r.reviewer.agentId, "reviewer-1", "spawned", null, null],
      [budget.agentId, "worker-3", "budget", null, null],
      [resumed.agentId, "worker-1", "completed", w1.agentId, null],
      [w2.agentId, "worker-2", "completed", null, null],
      [w1.agentId, "worker-1", "resumed", null, resumed.agentId],
    ],
  );
  expect((entries[1]?.usage as { costUsd: number } | undefined)?.costUsd).toBeGreaterThanOrEqual(0.1);
  expect(entries[2]).toMatchObject({ summary: "worker-1 finished task-1" });
  expect(entries[3]).toMatchObject({ summary: "worker-2 finished task-2" });

  // The demo cleaned up: no tmux server on its socket, no process it started, no temp dirs.
  expect(tmux.serverRunning(socket)).toBe(false);
  for (const pid of [...run.env.pids, run.env.projectServer?.pid ?? -1, run.env.server.pid]) {
    expect(processRunning(pid)).toBe(false);
  }
  expect(await Bun.file(`${r.projectDir}/opencode.json`).exists()).toBe(false);
}, 180_000);

test("npm run demo -- --help prints the usage and exits 0", () => {
  const result = Bun.spawnSync(["npm", "run", "--silent", "demo", "--", "--help"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(result.exitCode).toBe(0);
  expect(result.stdout.toString()).toContain("--model <provider/model>");
}, 30_000);

test("npm run demo -- --keep, as a user runs it: the scenario, then everything stays up until Ctrl-C stops it", async () => {
  const keepSocket = tmux.tmuxSocketName("oct-demo-keep");
  // Its own process group, so Ctrl-C can be sent the way a terminal sends it: to npm, bun and all.
  const child = spawn(
    "npm",
    ["run", "--silent", "demo", "--", "--keep", "--pause", "0", "--socket", keepSocket],
    {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  try {
    // The last line --keep prints names the processes left running.
    await waitFor(async () => /kill-server; kill [\d ]+\n/.test(output) || undefined, {
      timeoutMs: 120_000,
      message: `the demo to finish its scenario; output so far:\n${output}`,
    });
    expect(output).toContain("MODEL: SCRIPTED");
    expect(output).toContain(`tmux -L ${keepSocket} attach -t teams-demo`);
    expect(tmux.serverRunning(keepSocket)).toBe(true);
    // The session the printed attach command names is there to attach to.
    expect(tmux.tmux(keepSocket, ["has-session", "-t", "teams-demo"]).code).toBe(0);
    expect(output).toContain("--keep: everything is still running.");
    // One agent is left at work for the person to look at: its pane is open and the printed command attaches to it.
    expect(output).toContain("attach demo reviewer-1 --dir");
    const panes = tmux.tmux(keepSocket, ["list-panes", "-a", "-F", "#{@agent_name} #{pane_dead}"]).stdout;
    expect(panes).toContain("reviewer-1 0");
    const kept = (/kill-server; kill ([\d ]+)\n/.exec(output)?.[1] ?? "").trim().split(" ").map(Number);
    expect(kept.length).toBeGreaterThan(0);
    for (const pid of kept) expect(processRunning(pid)).toBe(true);

    process.kill(-(child.pid ?? 0), "SIGINT");
    const code = await exited;
    expect([130, null]).toContain(code);
    expect(output).toContain("Stopped every process the demo started and removed its temp dirs.");
    expect(tmux.serverRunning(keepSocket)).toBe(false);
    await waitFor(async () => kept.every((pid) => !processRunning(pid)) || undefined, {
      timeoutMs: 15_000,
      message: "the kept processes to stop",
    });
  } finally {
    try {
      process.kill(-(child.pid ?? 0), "SIGKILL");
    } catch {
      // the group is gone: the demo stopped as it should
    }
    tmux.killServer(keepSocket);
    removeSocketFile(keepSocket);
  }
}, 180_000);

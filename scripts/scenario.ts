/**
 * The scenario the product exists for (see README, "Two commands"), in one place for `npm run demo` and tests/e2e/scenario.test.ts, so
 * the demo cannot drift from what the test checks.
 *
 * A leader creates a team and plans three tasks (a review waits for the other two) and spawns two workers into real
 * tmux panes (`opencode attach`); each worker claims a task and heartbeats; one worker's pane and process are killed;
 * the liveness sweep declares it inactive and hands its task back; the leader resumes it on its old session; both
 * workers finish and report completion, which makes the review ready.
 *
 * Every prompt carries two scripts: a sentence for a real model and `@@` lines for the scripted mock model (which
 * ignores everything else). With the mock, `@@wait <gate>` holds a worker "at work" until the scenario opens the gate,
 * which is what makes the order of events, and so the test, deterministic.
 */
import path from "node:path";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { painter } from "../src/cli/format.ts";
import { collectHistory, renderHistory } from "../src/cli/history.ts";
import { collectStatus, renderStatus } from "../src/cli/status.ts";
import { collectTasks, renderTasks } from "../src/cli/tasks.ts";
import { basicAuthHeaders } from "../src/edges/opencode-client.ts";
import { processRunning, terminateProcess } from "../src/edges/process-info.ts";
import { recordedCredentials } from "../src/edges/server-auth.ts";
import { UnavailableOpencodeApi } from "../src/edges/unavailable.ts";
import { teamSessionName } from "../src/operations/agents/agent-pane.ts";
import type { ResumeAgentOutput } from "../src/operations/agents/resume.ts";
import type { SpawnAgentOutput } from "../src/operations/agents/spawn.ts";
import type { TeamsContext } from "../src/operations/context.ts";
import { parseOptions, type TeamsOptions } from "../src/options.ts";
import { buildContext } from "../src/plugin.ts";
import {
  type AgentHistory,
  AgentHistorySchema,
  type AgentState,
  type InboxMessage,
  type ServerInfo,
  ServerInfoSchema,
  type TaskBoard,
} from "../src/state/schemas.ts";
import { readJson } from "../src/state/store.ts";
import { type MockModel, startMockModel } from "../tests/e2e/harness/mock-model.ts";
import {
  OPENCODE_BIN,
  type OpencodeServer,
  pricedMockProvider,
  REPO_ROOT,
  type SessionMessage,
  startOpencode,
  toolResultsOf,
  waitFor,
} from "../tests/e2e/harness/opencode-server.ts";
import { callTool, onProcessGone, toolOutput } from "../tests/e2e/harness/session-tools.ts";
import { killServer, tmux } from "../tests/e2e/harness/tmux.ts";
import { removeSocketFile } from "../tests/e2e/tmux-socket-file.ts";

export const TEAM = "demo";

/**
 * Short timings so the scenario takes seconds, not minutes: a closed pane is noticed at the next sweep (every 0.5 s),
 * whatever the heartbeat's age. The stale threshold stays long enough that a worker waiting at its gate after one
 * heartbeat still counts as healthy (heartbeat age under half the threshold) on a loaded machine.
 */
export const SCRIPTED_TIMING = {
  staleThresholdMs: 30_000,
  sweepIntervalMs: 500,
  graceMisses: 2,
  eventCoalesceMs: 500,
} as const;

/** A real model thinks for seconds per turn: longer timings, so slow turns are not mistaken for deaths. */
export const REAL_MODEL_TIMING = {
  staleThresholdMs: 30_000,
  sweepIntervalMs: 2_000,
  graceMisses: 2,
  eventCoalesceMs: 2_000,
} as const;

export interface ScenarioOptions {
  /** Private tmux server (`tmux -L <socket>`) for every pane of the scenario. */
  socket: string;
  /** `provider/model` from the user's own OpenCode configuration; undefined: the scripted mock model. */
  realModel?: string;
  /** Narration: one call per line. */
  say: (line: string) => void;
  /** Pause after each step so a human can follow along in tmux. */
  pauseMs?: number;
  /** Colors in the printed tables. */
  color?: boolean;
  /** A tmux window running `opencode-teams watch` next to the agents' panes (default true). */
  statusWindow?: boolean;
}

/** What the scenario ran on; `stop()` ends every process it started and removes its temp dirs. Idempotent. */
export interface ScenarioEnv {
  readonly options: ScenarioOptions;
  readonly mock: MockModel | undefined;
  readonly server: OpencodeServer;
  /** A reading context on the project's state (no background work, never writes). */
  readonly ctx: TeamsContext;
  readonly timing: Pick<TeamsOptions, keyof typeof SCRIPTED_TIMING>;
  /** The `opencode serve` the plugin started for the agents' sessions, once known. */
  projectServer: ServerInfo | undefined;
  /** `attach` processes of the agents' panes and the status window's watch. */
  readonly pids: Set<number>;
  stop(): Promise<void>;
}

/** Start the model (scripted unless `realModel`), a leader-side `opencode serve` with our plugin, and nothing else. */
export async function startScenarioEnv(options: ScenarioOptions): Promise<ScenarioEnv> {
  const timing = options.realModel ? REAL_MODEL_TIMING : SCRIPTED_TIMING;
  const cancelWatchers: (() => void)[] = [];
  // If this process dies before stop(), the private tmux server (and with it every pane) goes too.
  cancelWatchers.push(onProcessGone(`tmux -L '${options.socket}' kill-server 2>/dev/null`));
  const mock = options.realModel ? undefined : await startMockModel();
  let server: OpencodeServer;
  try {
    server = await startOpencode({
      mockBaseUrl: mock?.baseUrl ?? "",
      ...(options.realModel ? { realModel: options.realModel } : {}),
      pluginOptions: { ...timing, tmuxSocket: options.socket, opencodeBin: OPENCODE_BIN },
      // The scripted model gets a price, so the status table shows costs and a budget can stop an agent.
      ...(options.realModel ? {} : { config: { provider: pricedMockProvider() } }),
      env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
    });
    await server.waitForToolIds(["create-team", "spawn-agent", "complete-agent", "resume-agent"]);
  } catch (error) {
    await mock?.stop();
    for (const cancel of cancelWatchers) cancel();
    throw error;
  }
  const ctx = buildContext({
    projectRoot: server.projectDir,
    options: parseOptions({ ...timing, background: false, tmuxSocket: options.socket }),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the scenario only reads state"),
  });
  let stopped = false;
  const env: ScenarioEnv = {
    options,
    mock,
    server,
    ctx,
    timing,
    projectServer: undefined,
    pids: new Set(),
    async stop() {
      if (stopped) return;
      stopped = true;
      killServer(options.socket);
      removeSocketFile(options.socket);
      const projectPid = env.projectServer?.pid;
      await Promise.all(
        [...env.pids, ...(projectPid !== undefined ? [projectPid] : [])].map((pid) =>
          terminateProcess(pid, 2_000),
        ),
      );
      await server.stop();
      await mock?.stop();
      for (const cancel of cancelWatchers) cancel();
    },
  };
  return env;
}

// ---------------------------------------------------------------------------------------------------------------
// What the scenario records (the test asserts on it; the demo prints it)

export type ToolJson = Record<string, unknown> & { success: boolean; error?: string };
type Spawned = SpawnAgentOutput & { success: true };
/** A tool call as its session saw it: the output when it completed, else the error. */
export type ToolCallRecord = { status: string; output?: ToolJson; error?: string };
type Resumed = ResumeAgentOutput & { success: true };

export interface ScenarioRecord {
  team: string;
  projectDir: string;
  leaderSessionId: string;
  taskIds: [string, string];
  spawned: [Spawned, Spawned];
  /** Spawned at the end for the ready review: it claims it and stays at work, its pane open. */
  reviewer: Spawned;
  /** The private tmux session holding the panes. */
  tmuxSession: string;
  attachCommand: string;
  /** Both workers claimed and heartbeat: the leader's view. */
  healthy: { status: ToolJson; list: ToolJson };
  /** The leader's send-message to the busy worker-2, and worker-2's completion notice in the leader's inbox. */
  steered: { result: ToolJson; completionNotice: InboxMessage | undefined };
  killed: {
    agentId: string;
    paneId: string;
    attachPid: number;
    attachRunningAfterKill: boolean;
    paneListedAfterKill: boolean;
    killedAt: number;
    inactiveAt: number;
    agent: AgentState;
    tasks: TaskBoard;
    leaderInbox: InboxMessage[];
    /** Texts of the user messages in the leader's session once the notice was delivered. */
    leaderSessionTexts: string[];
    history: AgentHistory;
  };
  resumed: {
    result: Resumed;
    /** The worker session's user messages after the resumed worker's first heartbeat. */
    sessionUserTexts: string[];
    /** Tool calls in that session, in order (old run and new run). */
    sessionTools: string[];
    tasks: TaskBoard;
  };
  completed: {
    /** complete-agent's result as the worker saw it, per worker name. */
    results: Record<string, ToolCallRecord>;
    agents: Record<string, AgentState>;
  };
  /** worker-3, spawned with a budget of $0.10 and stopped by it (scripted runs only). */
  budget?: { agentId: string; agent: AgentState; spentUsd: number; notices: string[] };
  /** readyNotice: what the leader was told when the review task's last blocker completed. */
  final: {
    status: ToolJson;
    history: ToolJson;
    tasks: TaskBoard;
    agents: AgentState[];
    readyNotice?: string;
  };
  durationMs: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Prompts

/**
 * A worker's whole job. `gates` are held before the work starts (`before`) and before it is reported done (`done`);
 * the first line comes first because the agent history shows the prompt's beginning as the run's task.
 */
function workerPrompt(
  name: string,
  task: { id: string; title: string },
  intro: string,
  gates: { before?: string; done: string },
): string {
  const taskId = task.id;
  const agent = "{{sys:agentId}}";
  const claim = { teamName: TEAM, taskId, status: "in_progress" };
  const beat = { teamName: TEAM, agentId: agent, metadata: { task: taskId } };
  const done = { teamName: TEAM, taskId, status: "completed" };
  const complete = {
    teamName: TEAM,
    agentId: agent,
    status: "completed",
    summary: `${name} finished ${taskId}`,
  };
  return [
    `${taskId} (${task.title}), as ${name} of team ${TEAM}. ${intro}`,
    `1. Claim task ${taskId}: call update-task with ${JSON.stringify(claim)}.`,
    `2. Call heartbeat with ${JSON.stringify(beat).replace(agent, "<your agentId>")}.`,
    "3. Do the work: run the shell command `sleep 20` (it stands in for real work).",
    `4. Call update-task with ${JSON.stringify(done)}.`,
    `5. Call complete-agent with ${JSON.stringify(complete).replace(agent, "<your agentId>")}.`,
    "(Lines starting with @@ drive the scripted demo model; ignore them.)",
    ...(gates.before ? [`@@wait ${gates.before}`] : []),
    `@@call update-task ${JSON.stringify(claim)}`,
    `@@call heartbeat ${JSON.stringify(beat)}`,
    `@@wait ${gates.done}`,
    `@@call update-task ${JSON.stringify(done)}`,
    `@@call complete-agent ${JSON.stringify(complete)}`,
  ].join("\n");
}

/**
 * The leader's steering message to worker-2. With the mock it replaces the rest of worker-2's script (the mock follows
 * the last user message): worker-2 completes with a report that says it followed the steer.
 */
/** The reviewer takes the ready review with claim-task, heartbeats and stays at work (idle, its pane open). */
function reviewerPrompt(): string {
  const beat = { teamName: TEAM, agentId: "{{sys:agentId}}", metadata: { doing: "reviewing" } };
  return [
    "Your agentId is in your system prompt. Take the next ready task with claim-task, then heartbeat and review it.",
    `@@call claim-task ${JSON.stringify({ teamName: TEAM })}`,
    `@@call heartbeat ${JSON.stringify(beat)}`,
  ].join("\n");
}

function steeringMessage(): string {
  const complete = {
    teamName: TEAM,
    agentId: "{{sys:agentId}}",
    status: "completed",
    summary: "worker-2 finished task-2",
    report: "Steered by the leader: ran the tests as asked.",
  };
  return [
    "Also run the tests before you finish, and say so in complete-agent's report.",
    "(Lines starting with @@ drive the scripted demo model; ignore them.)",
    `@@call complete-agent ${JSON.stringify(complete)}`,
  ].join("\n");
}

const START_GATE = "workers-start";
const doneGate = (name: string): string => `${name}-done`;

// ---------------------------------------------------------------------------------------------------------------
// Reading state

async function readOk<T>(what: string, read: (what: string) => Promise<{ kind: string; value?: T }>) {
  const result = await read(what);
  if (result.kind !== "ok" || result.value === undefined) throw new Error(`${what}: ${result.kind}`);
  return result.value;
}

/** The agent as the store reads it. */
function readAgentFile(env: ScenarioEnv, agentId: string): Promise<AgentState> {
  return readOk(agentId, (id) => env.ctx.store.readAgent(TEAM, id));
}

/** The board as the store reads it: tasks.json with its journal of status changes replayed. */
function readTasksFile(env: ScenarioEnv): Promise<TaskBoard> {
  return readOk(TEAM, (team) => env.ctx.store.readTasks(team));
}

function readHistoryFile(env: ScenarioEnv): Promise<AgentHistory> {
  return readOk(env.ctx.store.paths.history(TEAM), (f) => readJson(f, AgentHistorySchema));
}

async function readServerInfo(env: ScenarioEnv): Promise<ServerInfo> {
  const dir = env.ctx.projectRoot;
  return readOk(env.ctx.store.paths.serverInfo(dir), (f) => readJson(f, ServerInfoSchema));
}

function userTexts(messages: readonly SessionMessage[]): string[] {
  return messages.flatMap((m) =>
    m.info.role === "user" ? m.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])) : [],
  );
}

function asJson(value: unknown): ToolJson {
  if (typeof value !== "object" || value === null || !("success" in value))
    throw new Error(`not a tool result: ${JSON.stringify(value)}`);
  return value as ToolJson;
}

/** A tool result that must have succeeded; its failure message otherwise ends the scenario. */
function succeeded<T>(tool: string, value: unknown): T & { success: true } {
  const json = asJson(value);
  if (json.success !== true) throw new Error(`${tool} failed: ${json.error ?? JSON.stringify(json)}`);
  return json as unknown as T & { success: true };
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario

export async function runScenario(env: ScenarioEnv): Promise<ScenarioRecord> {
  const { server, options } = env;
  const started = Date.now();
  const scripted = env.mock !== undefined;
  const paint = painter(options.color === true);
  // A real model takes its time for every turn; the mock answers in milliseconds.
  const patience = scripted ? 1 : 10;
  let stepNo = 0;
  const step = async (title: string): Promise<void> => {
    if (stepNo > 0 && options.pauseMs) await Bun.sleep(options.pauseMs);
    stepNo += 1;
    options.say("");
    options.say(paint(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${stepNo}. ${title}`, "bold"));
  };
  const note = (line: string): void => options.say(`   ${line}`);
  const table = async (all = false): Promise<void> => {
    const report = await collectStatus(env.ctx, TEAM, all);
    for (const line of renderStatus(report, paint).split("\n")) note(line);
  };
  const leaderCall = async (tool: string, args: Record<string, unknown>): Promise<unknown> =>
    callTool(server, leader, tool, args, { timeoutMs: 60_000 * patience });

  await step("The leader (an OpenCode session) creates team 'demo'");
  const leader = await server.createSession("leader");
  succeeded("create-team", await leaderCall("create-team", { teamName: TEAM }));
  note(`leader session ${leader}; state in ${path.join(server.projectDir, ".opencode", "opencode-teams")}`);
  if (options.statusWindow !== false) openStatusWindow(env);

  await step("The leader plans three tasks in one create-task: a review waits for the other two");
  const titles = ["Write the parser", "Write the parser's tests", "Review the parser and its tests"];
  const plan = titles.map((title, i) => ({
    ref: `t${i}`,
    title,
    ...(i === 2 ? { blockedBy: ["t0", "t1"] } : {}),
  }));
  const planned = succeeded<{ tasks: { id: string; title: string; blockedBy: string[]; ready: boolean }[] }>(
    "create-task",
    await leaderCall("create-task", { teamName: TEAM, tasks: plan }),
  );
  for (const t of planned.tasks)
    note(`${t.id}: ${t.title}${t.ready ? " (ready)" : `, waits for ${t.blockedBy}`}`);
  const taskIds = planned.tasks.map((t) => t.id);
  const [task1, task2] = taskIds as [string, string];
  const tasks = [
    { id: task1, title: titles[0] ?? "" },
    { id: task2, title: titles[1] ?? "" },
  ] as const;

  await step("The leader spawns two workers, each in a tmux pane running `opencode attach`");
  const tmuxSession = teamSessionName(TEAM);
  const attachCommand = `tmux -L ${options.socket} attach -t ${tmuxSession}`;
  const spawned: Spawned[] = [];
  for (const [name, task] of [
    ["worker-1", tasks[0]],
    ["worker-2", tasks[1]],
  ] as const) {
    const intro = "Your agentId is in your system prompt. Do this:";
    const result = succeeded<SpawnAgentOutput>(
      "spawn-agent",
      await leaderCall("spawn-agent", {
        teamName: TEAM,
        name,
        prompt: workerPrompt(name, task, intro, { before: START_GATE, done: doneGate(name) }),
        ...(options.realModel ? { model: options.realModel } : {}),
      }),
    );
    spawned.push(result);
    note(`${name}: agent ${result.agentId}, pane ${result.paneId ?? "-"}, session ${result.sessionId}`);
    const agent = await readAgentFile(env, result.agentId);
    if (agent.attachPid !== undefined) env.pids.add(agent.attachPid);
    if (!env.projectServer) {
      env.projectServer = await readServerInfo(env);
      const pid = env.projectServer.pid;
      // The plugin started it detached: make sure it does not outlive us even if we are killed.
      onProcessGone(`kill -TERM ${pid} 2>/dev/null; sleep 2; kill -KILL ${pid} 2>/dev/null`, pid);
      note(`the plugin started the agents' OpenCode server: 127.0.0.1:${env.projectServer.port}`);
    }
  }
  const [w1, w2] = spawned as [Spawned, Spawned];
  options.say("");
  options.say(paint(`   Watch the panes:  ${attachCommand}`, "cyan"));
  options.say(
    paint(
      "   (Ctrl-b n: next window, status or agents; Ctrl-b d: detach; panes close as agents finish)",
      "gray",
    ),
  );
  const project = createOpencodeClient({
    baseUrl: `http://127.0.0.1:${env.projectServer?.port}`,
    directory: server.projectDir,
    // The server the plugin started has its own password, recorded in server.json.
    headers: basicAuthHeaders((env.projectServer && recordedCredentials(env.projectServer)) ?? {}),
  });
  const workerMessages = async (sessionId: string): Promise<SessionMessage[]> =>
    (await project.session.messages({ path: { id: sessionId } })).data ?? [];

  await step("Each worker claims its task (update-task) and heartbeats");
  env.mock?.open(START_GATE);
  for (const w of spawned) {
    await waitFor(
      async () => toolResultsOf(await workerMessages(w.sessionId), "heartbeat").some((r) => r.output),
      { timeoutMs: 30_000 * patience, intervalMs: 100, message: `${w.name}'s heartbeat` },
    );
  }
  const claimed = await readTasksFile(env);
  for (const t of claimed.tasks) note(`${t.id}: ${t.status}, owner ${t.assignee ?? "-"}`);

  await step("get-agent-status and list-agents: both workers healthy");
  const healthy = {
    status: asJson(await leaderCall("get-agent-status", { teamName: TEAM })),
    list: asJson(await leaderCall("list-agents", { teamName: TEAM })),
  };
  await table();

  await step(
    "The leader steers worker-2 (send-message): it is at work, so the message waits for its next step",
  );
  const steer = asJson(
    await leaderCall("send-message", { teamName: TEAM, to: "worker-2", message: steeringMessage() }),
  );
  const steerDelivery = (steer.deliveries as { delivery: string }[] | undefined)?.[0]?.delivery ?? "-";
  note(
    `send-message: ${steer.success ? `delivery ${steerDelivery}, id ${String(steer.messageId)}` : steer.error}`,
  );

  await step(`worker-1 crashes: its pane and its attach process are killed`);
  const paneId = w1.paneId ?? "";
  const attachPid = (await readAgentFile(env, w1.agentId)).attachPid ?? -1;
  const killedAt = Date.now();
  tmux(options.socket, ["kill-pane", "-t", paneId]);
  await terminateProcess(attachPid, 1_000);
  const attachRunningAfterKill = processRunning(attachPid);
  const paneListedAfterKill = tmux(options.socket, ["list-panes", "-a", "-F", "#{pane_id}"])
    .stdout.split("\n")
    .includes(paneId);
  note(
    `killed pane ${paneId} and process ${attachPid}; the next sweep (every ${
      env.timing.sweepIntervalMs / 1000
    } s) finds the pane gone`,
  );

  await step("The liveness sweep declares worker-1 inactive, hands its task back and tells the leader");
  const inactive = await waitFor(
    async () => {
      const agent = await readAgentFile(env, w1.agentId);
      return agent.status === "inactive" ? agent : undefined;
    },
    {
      timeoutMs: env.timing.staleThresholdMs + 4 * env.timing.sweepIntervalMs + 20_000,
      intervalMs: 100,
      message: "worker-1 to become inactive",
    },
  );
  const inactiveAt = Date.now();
  note(`inactive after ${((inactiveAt - killedAt) / 1000).toFixed(1)} s: ${inactive.statusReason ?? ""}`);
  const teamConfig = await env.ctx.store.readTeam(TEAM);
  const leaderAgentId = teamConfig.kind === "ok" ? teamConfig.value.leader : "";
  const leaderInbox = await waitFor(
    async () => {
      const inbox = (await env.ctx.store.readInbox(TEAM, leaderAgentId)).items;
      return inbox.some((m) => m.type === "agent_inactive" && m.deliveredAt) ? inbox : undefined;
    },
    { timeoutMs: 15_000, message: "the inactive notice delivered to the leader" },
  );
  const leaderSessionTexts = userTexts(await server.messages(leader));
  const afterDeath = await readTasksFile(env);
  for (const t of afterDeath.tasks) note(`${t.id}: ${t.status}, owner ${t.assignee ?? "-"}`);
  const notice = leaderInbox.find((m) => m.type === "agent_inactive");
  note(`leader's session got: "${notice?.text ?? ""}"`);
  const historyAfterDeath = await waitFor(
    async () => {
      const history = await readHistoryFile(env);
      return history.entries.some((e) => e.agent_id === w1.agentId && e.status === "interrupted")
        ? history
        : undefined;
    },
    { timeoutMs: 10_000, message: "worker-1's history entry to say interrupted" },
  );
  await table();

  await step("The leader resumes worker-1 on its old session (resume-agent)");
  const resumePrompt = workerPrompt(
    "worker-1",
    tasks[0],
    "You were interrupted and are resumed; your task went back to pending. Your new agentId is in your system prompt. Do this:",
    { done: doneGate("worker-1-resumed") },
  );
  const resumed = succeeded<ResumeAgentOutput>(
    "resume-agent",
    await leaderCall("resume-agent", { teamName: TEAM, agentId: w1.agentId, prompt: resumePrompt }),
  );
  note(
    `new agent ${resumed.agentId} resumes ${resumed.resumedFrom}; session ${resumed.sessionId} reused: ${resumed.sessionReused}; pane ${resumed.paneId ?? "-"}`,
  );
  const resumedAgent = await readAgentFile(env, resumed.agentId);
  if (resumedAgent.attachPid !== undefined) env.pids.add(resumedAgent.attachPid);
  const resumedMessages = await waitFor(
    async () => {
      const messages = await workerMessages(resumed.sessionId);
      const beats = toolResultsOf(messages, "heartbeat").filter((r) => r.output);
      return beats.length >= 2 ? messages : undefined;
    },
    { timeoutMs: 30_000 * patience, message: "the resumed worker's heartbeat" },
  );
  const resumedTasks = await readTasksFile(env);
  note(`its session holds ${resumedMessages.length} messages, the earlier conversation included`);
  await table();

  await step("worker-2 finishes: update-task completed, then complete-agent");
  const completedResults: Record<string, ToolCallRecord> = {};
  const completedAgents: Record<string, AgentState> = {};
  const finish = async (name: string, gate: string, agentId: string, sessionId: string): Promise<void> => {
    env.mock?.open(gate);
    completedAgents[name] = await waitFor(
      async () => {
        const agent = await readAgentFile(env, agentId);
        return agent.status === "terminated" ? agent : undefined;
      },
      { timeoutMs: 30_000 * patience, message: `${name} to complete` },
    );
    // The agent's file says terminated before the tool call returns to the worker's session.
    const result = await waitFor(
      async () =>
        toolResultsOf(await workerMessages(sessionId), "complete-agent").find(
          (r) => r.status === "completed" || r.status === "error",
        ),
      { timeoutMs: 10_000, message: `${name}'s complete-agent result` },
    );
    // Kept as the worker saw it, failure included: the test judges it, the demo goes on to show the final state.
    completedResults[name] =
      result.status === "completed"
        ? { status: "completed", output: asJson(toolOutput(result)) }
        : { status: result.status, error: result.error ?? "" };
    const outcome = completedResults[name];
    note(
      outcome?.status === "completed"
        ? `${name} reported completion; the leader is told with its summary`
        : `${name}'s complete-agent failed: ${outcome && "error" in outcome ? outcome.error : "?"}`,
    );
  };
  await finish("worker-2", doneGate("worker-2"), w2.agentId, w2.sessionId);
  const completionNotice = (await env.ctx.store.readInbox(TEAM, leaderAgentId)).items.find(
    (m) => m.type === "agent_completed" && m.data?.agentId === w2.agentId,
  );
  note(`the leader's completion notice: "${completionNotice?.text.replace(/\n/g, " / ") ?? "-"}"`);

  /** worker-3: twenty model calls of about 0.7 s at $0.02 each, on a budget of $0.10. */
  const budgetStop = async () => {
    await step(
      "worker-3 gets a budget of $0.10 for twenty model calls at $0.02: told at 80%, stopped at 100%",
    );
    const call = `@@sleep 700\n@@call list-tasks {"teamName":"${TEAM}"}`;
    const prompt = [
      "Check the task board twenty times.",
      "(The next lines are for a scripted test model; ignore them.)",
      ...Array.from({ length: 20 }, () => call),
    ].join("\n");
    const w3 = succeeded<SpawnAgentOutput>(
      "spawn-agent",
      await leaderCall("spawn-agent", {
        teamName: TEAM,
        name: "worker-3",
        prompt,
        headless: true,
        budget: { usd: 0.1 },
      }),
    );
    const agent = await waitFor(
      async () => {
        const read = await readAgentFile(env, w3.agentId);
        return read.status === "terminated" ? read : undefined;
      },
      { timeoutMs: 60_000, message: "worker-3 stopped by its budget" },
    );
    const view = await env.ctx.store.readAgentView(TEAM, w3.agentId);
    const spentUsd = view.kind === "ok" ? (view.value.state.usage?.totals.costUsd ?? 0) : 0;
    note(`worker-3 ${agent.outcome}: ${agent.statusReason ?? ""} (spent $${spentUsd.toFixed(2)})`);
    const notices = await waitFor(
      async () => {
        const inbox = (await env.ctx.store.readInbox(TEAM, leaderAgentId)).items;
        const about = inbox.filter((m) => m.text.includes("'worker-3'")).map((m) => m.text);
        return about.length >= 2 && inbox.every((m) => m.deliveredAt) ? about : undefined;
      },
      { timeoutMs: 15_000, message: "the leader told of worker-3's budget" },
    );
    for (const text of notices) note(`leader told: ${text.split("\n")[0]}`);
    return { agentId: w3.agentId, agent, spentUsd, notices };
  };

  await step("The resumed worker-1 finishes too");
  await finish("worker-1", doneGate("worker-1-resumed"), resumed.agentId, resumed.sessionId);

  // Completion notices that follow one another within noticeDigestMs reach the leader together at the window's end;
  // let them land before the leader's next turns (the scripted model follows the last user message).
  await waitFor(
    async () => (await env.ctx.store.readInbox(TEAM, leaderAgentId)).items.every((m) => m.deliveredAt),
    { timeoutMs: 15_000, message: "the leader's completion notices delivered" },
  );
  note("both completion notices reached the leader's session");

  const budget = scripted ? await budgetStop() : undefined;

  await step(
    "The review is ready: the leader spawns reviewer-1, who takes it with claim-task and stays on it",
  );
  const reviewer = succeeded<SpawnAgentOutput>(
    "spawn-agent",
    await leaderCall("spawn-agent", {
      teamName: TEAM,
      name: "reviewer-1",
      role: "reviewer",
      prompt: reviewerPrompt(),
      ...(options.realModel ? { model: options.realModel } : {}),
    }),
  );
  const reviewerAgent = await readAgentFile(env, reviewer.agentId);
  if (reviewerAgent.attachPid !== undefined) env.pids.add(reviewerAgent.attachPid);
  const review = await waitFor(
    async () =>
      (await readTasksFile(env)).tasks.find(
        (t) => t.assignee === reviewer.agentId && t.status === "in_progress",
      ),
    { timeoutMs: 30_000 * patience, message: "reviewer-1 to claim the review" },
  );
  note(`reviewer-1 took ${review.id} "${review.title}"; its pane stays open for you to look at`);

  await step("Final state: get-agent-status (terminated included) and agent-history");
  const final = {
    status: asJson(await leaderCall("get-agent-status", { teamName: TEAM, includeTerminated: true })),
    history: asJson(await leaderCall("agent-history", { teamName: TEAM })),
    tasks: await readTasksFile(env),
    agents: (await env.ctx.store.listAgentViews(TEAM)).items.map((v) => v.state),
    readyNotice: (await env.ctx.store.readInbox(TEAM, leaderAgentId)).items.find((m) => m.data?.nowReady)
      ?.text,
  };
  await table(true);
  note("");
  for (const line of renderTasks(await collectTasks(env.ctx, TEAM), paint).split("\n")) note(line);
  const history = await collectHistory(env.ctx, TEAM);
  for (const line of renderHistory(history, paint).split("\n")) note(line);

  return {
    team: TEAM,
    projectDir: server.projectDir,
    leaderSessionId: leader,
    taskIds: [task1, task2],
    spawned: [w1, w2],
    reviewer,
    tmuxSession,
    attachCommand,
    healthy,
    steered: { result: steer, completionNotice },
    killed: {
      agentId: w1.agentId,
      paneId,
      attachPid,
      attachRunningAfterKill,
      paneListedAfterKill,
      killedAt,
      inactiveAt,
      agent: inactive,
      tasks: afterDeath,
      leaderInbox,
      leaderSessionTexts,
      history: historyAfterDeath,
    },
    resumed: {
      result: resumed,
      sessionUserTexts: userTexts(resumedMessages),
      sessionTools: toolResultsOf(resumedMessages).map((r) => r.tool),
      tasks: resumedTasks,
    },
    completed: { results: completedResults, agents: completedAgents },
    ...(budget ? { budget } : {}),
    final,
    durationMs: Date.now() - started,
  };
}

/** The status window: `opencode-teams watch` in the private tmux session, next to the agents' window. */
export function openStatusWindow(env: ScenarioEnv): void {
  const cli = path.join(REPO_ROOT, "src", "cli", "main.ts");
  const args = [
    "new-session",
    "-d",
    "-s",
    teamSessionName(TEAM),
    "-n",
    "status",
    "-x",
    "200",
    "-y",
    "50",
    "--",
    process.execPath,
    cli,
    "watch",
    TEAM,
    "--all",
    "--interval",
    "1",
    "--dir",
    env.server.projectDir,
  ];
  // The tmux server starts with the OpenCode server's environment, so the agents' panes it runs later are as
  // hermetic as that server (panes inherit the tmux server's environment, whoever asks for them).
  const result = Bun.spawnSync(["tmux", "-L", env.options.socket, ...args], {
    env: env.server.env,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (result.exitCode !== 0) throw new Error(`tmux new-session failed: ${result.stderr.toString()}`);
  const pid = Number(
    tmux(env.options.socket, [
      "list-panes",
      "-t",
      `${teamSessionName(TEAM)}:status`,
      "-F",
      "#{pane_pid}",
    ]).stdout.trim(),
  );
  if (Number.isInteger(pid) && pid > 0) env.pids.add(pid);
}

/** For `--keep`: the processes left running, so they can be stopped by hand if the demo itself is killed. */
export function keptProcesses(env: ScenarioEnv): number[] {
  const pids = [...env.pids, ...(env.projectServer ? [env.projectServer.pid] : []), env.server.pid];
  return pids.filter((pid) => processRunning(pid));
}

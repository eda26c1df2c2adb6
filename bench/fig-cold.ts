/**
 * Figure 11 (issue 42): the first worker of a team created a few seconds before, as a leader does it. A fresh project
 * per round: a leader's `opencode serve` with this plugin, create-team through the scripted model, a pause, then
 * spawn-agent (headless: the pane boots beside the prompt and does not delay it). Measured: from the spawn-agent
 * call's start (its tool part, as OpenCode records it) to the worker's first request at the mock model. Floor: a child
 * session of the leader's session, made and prompted in the leader's own server right before the spawn (what running
 * members as child sessions would cost). Both meet the project server's background boot (the prewarm) the same way.
 */
import { readFileSync } from "node:fs";
import { terminateProcess } from "../src/edges/process-info.ts";
import {
  type MockModel,
  OPENCODE_BIN,
  type OpencodeServer,
  startMockModel,
  startOpencode,
  type ToolResultInfo,
  waitFor,
} from "../tests/e2e/harness/index.ts";
import { serverInfo } from "./hand-spawn.ts";
import { note } from "./setup.ts";
import { type Figure, figure, quantile, zipRounds } from "./stats.ts";

/** How long after create-team the leader spawns: "a few seconds", as a model takes to plan its first worker. */
const AFTER_CREATE_MS = 3_000;

interface ColdSamples {
  /** spawn-agent's tool start -> the worker's first model request. */
  firstRequest: number[];
  /** A child session's create + prompt in the leader's server -> its first model request. */
  childFloor: number[];
  /** spawn-agent's tool time (call -> active, prompt proven delivered). */
  toolTime: number[];
  /** The same first request with `prewarmServer: false`: the spawn boots the server (what issue 42 measured). */
  unwarmed: number[];
}

/** When the mock model first saw a request whose prompt is exactly `@@say <marker>` (not the leader's call naming it). */
async function requestWith(mock: MockModel, marker: string): Promise<number> {
  const ours = (text: string) => text.trim() === `@@say ${marker}`;
  const found = await waitFor(() => mock.requests.find((r) => ours(r.lastUserText)), {
    timeoutMs: 120_000,
    intervalMs: 5,
    message: `a model request with ${marker}`,
  });
  return found.receivedAt;
}

async function childFloor(server: OpencodeServer, mock: MockModel, leader: string, round: number) {
  const marker = `floor-${round}`;
  const started = Date.now();
  const child = await server.client.session.create({ body: { parentID: leader, title: marker } });
  if (!child.data) throw new Error("floor: no child session");
  await server.promptAsync(child.data.id, `@@say ${marker}`);
  return (await requestWith(mock, marker)) - started;
}

/** The project server's own log, the lines that say where its boot went (for the note, not the figure). */
function bootLines(projectDir: string): string[] {
  const info = serverInfo(projectDir);
  if (!info) return [];
  return readFileSync(info.logPath, "utf8")
    .split("\n")
    .filter((l) =>
      /serve on|listening|creating instance|bootstrapping|message=initialized|llm runtime/.test(l),
    )
    .map((l) => l.replace(/ run=\w+/, "").slice(0, 160));
}

/** The plugin's word on the prewarm's warm-up turn, from the leader's server log (for the note, not the figure). */
function warmupLines(leaderLog: string): string[] {
  return readFileSync(leaderLog, "utf8")
    .split("\n")
    .filter((l) => l.includes("prewarm warm-up turn"))
    .map((l) => l.replace(/ run=\w+/, "").slice(0, 200));
}

/** The last finished call's start and end, as OpenCode recorded them. */
function toolTime(results: readonly ToolResultInfo[]): { start: number; end: number } | undefined {
  const time = (results.at(-1)?.part.state as { time?: { start: number; end?: number } } | undefined)?.time;
  return time?.end ? { start: time.start, end: time.end } : undefined;
}

async function coldRound(mock: MockModel, round: number, out: ColdSamples, prewarm = true): Promise<void> {
  const main = await startOpencode({
    mockBaseUrl: mock.baseUrl,
    gitInit: true,
    pluginOptions: { prewarmServer: prewarm },
    env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  });
  try {
    await main.waitForToolIds(["create-team", "spawn-agent"], { intervalMs: 20 });
    const leader = await main.createSession("leader");
    await main.promptAsync(leader, '@@call create-team {"teamName":"cold"}');
    const team = await waitFor(async () => toolTime(await main.toolResults(leader, "create-team")), {
      timeoutMs: 80_000,
      message: "create-team",
    });
    await Bun.sleep(Math.max(0, team.end + AFTER_CREATE_MS - Date.now()));
    const floor = await childFloor(main, mock, leader, round + (prewarm ? 0 : 100));
    const marker = `cold-${round}${prewarm ? "" : "-unwarmed"}`;
    const args = { teamName: "cold", headless: true, prompt: `@@say ${marker}` };
    await main.promptAsync(leader, `@@call spawn-agent ${JSON.stringify(args)}`);
    const reached = await requestWith(mock, marker);
    await main.waitForIdle(leader, { timeoutMs: 80_000 });
    const time = toolTime(await main.toolResults(leader, "spawn-agent"));
    if (!time) throw new Error("cold spawn: no finished spawn-agent call");
    if (prewarm) {
      out.firstRequest.push(reached - time.start);
      out.childFloor.push(floor);
      out.toolTime.push(time.end - time.start);
    } else out.unwarmed.push(reached - time.start);
    note(
      `cold ${round + 1}${prewarm ? "" : " (no prewarm)"}: spawn call -> first request ${reached - time.start} ms (tool ${time.end - time.start} ms), child session floor ${floor} ms; spawn ${time.start - team.end} ms after create-team`,
    );
    for (const line of bootLines(main.projectDir)) note(`    ${line}`);
    for (const line of warmupLines(main.logPath)) note(`    ${line}`);
  } finally {
    const info = serverInfo(main.projectDir);
    if (info && info.pid !== main.pid) await terminateProcess(info.pid, 2_000);
    await main.stop();
  }
}

export async function benchCold(quick: boolean): Promise<Figure[]> {
  const out: ColdSamples = { firstRequest: [], childFloor: [], toolTime: [], unwarmed: [] };
  const mock = await startMockModel();
  try {
    for (let round = 0; round < (quick ? 1 : 3); round++) {
      await coldRound(mock, round, out);
      await coldRound(mock, round, out, false);
    }
  } finally {
    await mock.stop();
  }
  return [
    figure(
      "13a",
      "cold spawn to first request",
      "ms",
      out.firstRequest,
      {
        floor: {
          what: "a child session made and prompted in the leader's own server, to its first model request",
          samples: out.childFloor,
          maxRatio: 1.5,
          pairs: zipRounds(out.firstRequest, out.childFloor),
        },
      },
      `spawn-agent ${AFTER_CREATE_MS / 1000} s after create-team in a fresh project, from the call to the worker's first ` +
        `model request; target also 2 s absolute; spawn-agent's own time in it: median ${quantile(out.toolTime, 0.5)} ms`,
    ),
    figure(
      "13b",
      "13a without the prewarm",
      "ms",
      out.unwarmed,
      {
        floor: {
          what: "figure 13a's rounds",
          samples: out.firstRequest,
          pairs: zipRounds(out.unwarmed, out.firstRequest),
        },
      },
      "prewarmServer: false, so the spawn boots the project server; timed by turns with 13a",
    ),
  ];
}

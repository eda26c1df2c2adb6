/**
 * A person acting from the CLI, for real: the leader's `opencode serve` (scripted model) spawns a worker into a pane on
 * a private tmux server and a git worktree; then the CLI (a separate process, as a person runs it) attaches a terminal
 * to the worker's pane from inside tmux and from outside, refuses to merge a running agent, kills it, resumes it on its
 * old session in a new pane, and merges its branch; the leader's inbox holds a notice for each thing the person did.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import path from "node:path";
import { DEFAULT_STORAGE_SUBDIR, StoragePaths } from "../../src/state/paths.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { commitProjectForWorktrees, git } from "../helpers/git.ts";
import {
  type MockModel,
  OPENCODE_BIN,
  type OpencodeServer,
  startMockModel,
  startOpencode,
  type ToolResultInfo,
  tmux,
  waitFor,
} from "./harness/index.ts";

const TEAM = "cliact";
const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
const socket = tmux.tmuxSocketName("oct-cli");
/** A second private server whose panes are the person's terminals (tmux clients of `socket`). */
const terminals = tmux.tmuxSocketName("oct-term");
let mock: MockModel;
let server: OpencodeServer;
let project: string;
let store: TeamStore;
let leader: string;

beforeAll(async () => {
  mock = await startMockModel();
  server = await startOpencode({
    mockBaseUrl: mock.baseUrl,
    gitInit: true,
    pluginOptions: { background: false, tmuxSocket: socket },
    config: { permission: { bash: "allow", edit: "allow", external_directory: "allow" } },
    env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  });
  project = server.projectDir;
  await server.waitForToolIds(["spawn-agent"]);
  commitProjectForWorktrees(project);
  store = new TeamStore(new StoragePaths(path.join(project, DEFAULT_STORAGE_SUBDIR)));
  leader = await server.createSession("leader");
}, 90_000);

afterAll(async () => {
  // server.stop() also stops the project server the plugin started (harness/project-servers.ts).
  tmux.killServer(terminals);
  tmux.killServer(socket);
  await server?.stop();
  await mock?.stop();
}, 30_000);

async function leaderCalls<T = Record<string, unknown>>(tool: string, args: unknown): Promise<T> {
  const before = (await server.toolResults(leader, tool)).length;
  await server.promptAndWait(leader, `@@call ${tool} ${JSON.stringify(args)}`, { timeoutMs: 60_000 });
  const results: ToolResultInfo[] = await server.toolResults(leader, tool);
  const result = results[before];
  if (result?.status !== "completed") throw new Error(`${tool}: ${result?.status} ${result?.error ?? ""}`);
  return JSON.parse(result.output ?? "null") as T;
}

async function cli(...args: string[]) {
  const env: Record<string, string> = { ...process.env, NO_COLOR: "" } as Record<string, string>;
  delete env.TMUX;
  delete env.TMUX_PANE;
  const child = Bun.spawn([process.execPath, CLI, ...args, "--dir", project], {
    stdout: "pipe",
    stderr: "pipe",
    env,
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { stdout, stderr, code };
}

async function records(): Promise<AgentState[]> {
  return (await store.listAgentViews(TEAM)).items.map((view) => view.state).filter((s) => s.name === "w1");
}

async function running(): Promise<AgentState> {
  let found: AgentState | undefined;
  await waitFor(
    async () => {
      found = (await records()).find((s) => s.status === "active" || s.status === "idle");
      return found?.paneId !== undefined;
    },
    { timeoutMs: 40_000, message: "w1 running with a pane" },
  );
  if (!found) throw new Error("unreachable");
  return found;
}

async function leaderNotices(): Promise<string[]> {
  const team = await store.readTeam(TEAM);
  if (team.kind !== "ok") throw new Error("no team");
  return (await store.readInbox(TEAM, team.value.leader)).items.map((m) => m.text);
}

/** What a tmux client of `socket` shows: `<session> <window> <pane>`, per client. */
function clients(): string[] {
  const listed = tmux.tmux(socket, ["list-clients", "-F", "#{session_name} #{window_name} #{pane_id}"]);
  return listed.stdout.split("\n").filter(Boolean);
}

test("attach, kill, resume and merge from the CLI go through the leader's checks and the leader is told", async () => {
  expect(await leaderCalls("create-team", { teamName: TEAM, worktrees: true })).toMatchObject({
    success: true,
  });
  const ids = `"teamName":"${TEAM}","agentId":"{{sys:agentId}}"`;
  const commit = `printf 'from w1\\n' > app.txt && git add app.txt && git commit -qm 'w1: edit app'`;
  const spawned = await leaderCalls<{ success: boolean; agentId: string }>("spawn-agent", {
    teamName: TEAM,
    name: "w1",
    prompt: [
      `@@call heartbeat {${ids}}`,
      `@@call bash ${JSON.stringify({ command: commit, description: "work" })}`,
    ].join("\n"),
  });
  expect(spawned.success).toBe(true);
  const first = await running();
  await waitFor(
    () => git(first.worktree?.path ?? project, "log", "-1", "--format=%s").includes("w1: edit app"),
    {
      timeoutMs: 40_000,
      message: "w1's commit",
    },
  );

  // Inside tmux: a person's session on the team's tmux server, shown in a terminal (a pane of the other server).
  tmux.tmux(socket, ["new-session", "-d", "-s", "person", "-x", "160", "-y", "40"]);
  tmux.tmux(terminals, [
    "new-session",
    "-d",
    "-s",
    "t1",
    "-x",
    "160",
    "-y",
    "40",
    `env -u TMUX tmux -L ${socket} attach -t person`,
  ]);
  await waitFor(() => clients().some((c) => c.startsWith("person ")), {
    timeoutMs: 10_000,
    message: "a client",
  });
  const command = `${process.execPath} ${CLI} attach ${TEAM} w1 --dir ${project}`;
  tmux.tmux(socket, ["send-keys", "-t", "=person:", command, "Enter"]);
  await waitFor(() => clients().includes(`teams-${TEAM} team-${TEAM} ${first.paneId}`), {
    timeoutMs: 15_000,
    message: "the person's client switched to w1's pane",
  });
  // Outside tmux: the CLI attaches the terminal itself, to the team's window.
  tmux.tmux(terminals, [
    "new-window",
    "-t",
    "=t1",
    `env -u TMUX ${process.execPath} ${CLI} attach ${TEAM} --dir ${project}`,
  ]);
  await waitFor(() => clients().filter((c) => c.startsWith(`teams-${TEAM} team-${TEAM} `)).length === 2, {
    timeoutMs: 15_000,
    message: "a second client attached to the team's window",
  });

  // A running agent's branch is not merged without --force, in the CLI's words.
  const refused = await cli("merge", TEAM, "w1");
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("pass --force");
  expect(refused.stderr).not.toContain("force: true");

  const killed = await cli("kill", TEAM, "w1", "--force", "--json");
  expect(killed.code).toBe(0);
  expect(JSON.parse(killed.stdout)).toMatchObject({ success: true, method: "force", agentId: first.agentId });
  expect((await store.readAgent(TEAM, first.agentId)).kind === "ok").toBe(true);
  await waitFor(
    async () =>
      !tmux.tmux(socket, ["list-panes", "-a", "-F", "#{pane_id}"]).stdout.includes(`${first.paneId}\n`),
    {
      timeoutMs: 10_000,
      message: "w1's pane closed",
    },
  );
  expect((await cli("kill", TEAM, "w1")).stderr).toContain("already terminated");

  const resumed = await cli("resume", TEAM, first.agentId.slice(0, 8));
  expect(resumed.code).toBe(0);
  expect(resumed.stdout).toContain("on its old session");
  const second = await running();
  expect(second.agentId).not.toBe(first.agentId);
  expect(second.sessionId).toBe(first.sessionId);
  expect(second.tmux?.socket).toBe(socket);

  expect((await cli("kill", TEAM, "w1", "--force")).code).toBe(0);
  const merged = await cli("merge", TEAM, "w1", "--squash");
  expect(merged.code).toBe(0);
  expect(merged.stdout).toContain("Merged teams/cliact/w1 into");
  expect(readFileSync(path.join(project, "app.txt"), "utf8")).toBe("from w1\n");

  const notices = await leaderNotices();
  for (const what of ["stopped w1", "resumed w1", "merged w1"]) {
    expect(notices.some((text) => text.startsWith(`A person at the terminal ${what}`))).toBe(true);
  }
}, 240_000);

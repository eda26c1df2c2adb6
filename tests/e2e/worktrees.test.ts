/**
 * Agents in their own git worktrees, for real: the leader's `opencode serve` (scripted mock model) runs the tools; the
 * plugin cold-starts the project's own `opencode serve`, where each agent's session runs in its worktree with a plugin
 * instance of its own there, edits and commits with OpenCode's bash tool, heartbeats and completes into the leader's
 * storage (the project server carries the leader's storage dir, specs/storage.md). The leader merges one branch, the
 * second conflicts; a dirty agent's worktree survives a kill and its resume continues in it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { DEFAULT_STORAGE_SUBDIR, StoragePaths } from "../../src/state/paths.ts";
import type { AgentState, AgentWorktree } from "../../src/state/schemas.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { commitProjectForWorktrees, git } from "../helpers/git.ts";
import {
  type MockModel,
  OPENCODE_BIN,
  type OpencodeServer,
  startMockModel,
  startOpencode,
  type ToolResultInfo,
  waitFor,
} from "./harness/index.ts";

const TEAM = "wt";
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
    pluginOptions: { background: false },
    config: { permission: { bash: "allow", edit: "allow", external_directory: "allow" } },
    env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  });
  project = server.projectDir;
  await server.waitForToolIds(["spawn-agent", "merge-agent", "agent-diff"]);
  // The agents' worktrees are checkouts of a commit: the config that loads the plugin and the model must be in it.
  commitProjectForWorktrees(project);
  store = new TeamStore(new StoragePaths(path.join(project, DEFAULT_STORAGE_SUBDIR)));
  leader = await server.createSession("leader");
}, 90_000);

afterAll(async () => {
  // server.stop() also stops the project server the plugin started (harness/project-servers.ts).
  await server?.stop();
  await mock?.stop();
}, 30_000);

/** One tool call by the leader through the scripted model; its parsed output. */
async function leaderCalls<T = Record<string, unknown>>(tool: string, args: unknown): Promise<T> {
  const before = (await server.toolResults(leader, tool)).length;
  await server.promptAndWait(leader, `@@call ${tool} ${JSON.stringify(args)}`, { timeoutMs: 60_000 });
  const results: ToolResultInfo[] = await server.toolResults(leader, tool);
  const result = results[before];
  if (result?.status !== "completed") throw new Error(`${tool}: ${result?.status} ${result?.error ?? ""}`);
  return JSON.parse(result.output ?? "null") as T;
}

const ids = `"teamName":"${TEAM}","agentId":"{{sys:agentId}}"`;
const bash = (command: string) => `@@call bash ${JSON.stringify({ command, description: "work" })}`;
const heartbeat = `@@call heartbeat {${ids},"metadata":{"where":"worktree"}}`;
const completeCall = `@@call complete-agent {${ids},"status":"completed","summary":"done"}`;

interface Spawned {
  success: boolean;
  error?: string;
  agentId: string;
  worktree: AgentWorktree;
}

async function spawnNamed(name: string, script: string[]): Promise<Spawned> {
  const spawned = await leaderCalls<Spawned>("spawn-agent", {
    teamName: TEAM,
    name,
    prompt: script.join("\n"),
    headless: true,
  });
  if (!spawned.success || !spawned.worktree) throw new Error(`spawn ${name}: ${JSON.stringify(spawned)}`);
  return spawned;
}

async function agentState(agentId: string): Promise<AgentState> {
  const read = await store.readAgent(TEAM, agentId);
  if (read.kind !== "ok") throw new Error(`agent ${agentId}: ${read.kind}`);
  return read.value;
}

async function until(agentId: string, done: (state: AgentState) => boolean, what: string) {
  await waitFor(async () => done(await agentState(agentId)), { timeoutMs: 40_000, message: what });
}

const file = (dir: string) => readFileSync(path.join(dir, "app.txt"), "utf8");

type Result = { success: boolean; error?: string; warnings?: string[] } & Record<string, unknown>;

test("two agents in worktrees: isolated, heartbeat and complete reach the leader, merge then conflict, kill keeps dirty work, resume continues", async () => {
  expect(await leaderCalls("create-team", { teamName: TEAM, worktrees: true })).toMatchObject({
    success: true,
  });
  const commitAs = (who: string) =>
    bash(`printf 'from ${who}\\n' > app.txt && git add app.txt && git commit -qm '${who}: edit app'`);
  const a = await spawnNamed("a", [heartbeat, commitAs("a"), completeCall]);
  const b = await spawnNamed("b", [heartbeat, commitAs("b"), completeCall]);
  expect(a.worktree.branch).toBe("teams/wt/a");
  await until(a.agentId, (s) => s.status === "terminated", "agent a to complete");
  await until(b.agentId, (s) => s.status === "terminated", "agent b to complete");

  // Heartbeat and complete-agent, called from the worktree's plugin instance, landed in the leader's storage.
  for (const agent of [a, b]) {
    expect((await agentState(agent.agentId)).outcome).toBe("completed");
    const view = await store.readAgentView(TEAM, agent.agentId);
    expect(view.kind === "ok" && view.value.heartbeat?.metadata).toEqual({ where: "worktree" });
    expect(existsSync(path.join(agent.worktree.path, DEFAULT_STORAGE_SUBDIR))).toBe(false);
  }
  // Each sees its own change only; the leader's checkout sees neither.
  expect(file(a.worktree.path)).toBe("from a\n");
  expect(file(b.worktree.path)).toBe("from b\n");
  expect(file(project)).toBe("v1\n");
  const diff = await leaderCalls<Result & { commits: { subject: string }[] }>("agent-diff", {
    teamName: TEAM,
    agentId: b.agentId,
  });
  expect(diff).toMatchObject({ success: true, ahead: 1, uncommitted: [] });
  expect(diff.commits[0]?.subject).toBe("b: edit app");

  const first = await leaderCalls<Result>("merge-agent", { teamName: TEAM, agentId: a.agentId });
  expect(first).toMatchObject({
    success: true,
    into: git(project, "branch", "--show-current"),
    files: ["app.txt"],
    worktreeRemoved: true,
  });
  expect(file(project)).toBe("from a\n");
  const head = git(project, "rev-parse", "HEAD");
  const second = await leaderCalls<Result>("merge-agent", { teamName: TEAM, agentId: b.agentId });
  expect(second.success).toBe(false);
  expect(second.error).toContain("would conflict in: app.txt");
  expect(git(project, "rev-parse", "HEAD")).toBe(head);
  expect(git(project, "status", "--porcelain")).toBe("");

  // A dirty agent: killed, its worktree stays; resumed, it goes on in the same worktree and commits.
  const c = await spawnNamed("c", [heartbeat, bash("printf 'half\\n' > app.txt"), "@@say paused"]);
  await until(c.agentId, (s) => s.heartbeatSource === "tool" || s.status === "active", "agent c to start");
  await waitFor(
    () => existsSync(path.join(c.worktree.path, "app.txt")) && file(c.worktree.path) === "half\n",
    {
      timeoutMs: 40_000,
      message: "agent c to write app.txt",
    },
  );
  const killed = await leaderCalls<Result>("kill-agent", { teamName: TEAM, agentId: c.agentId, force: true });
  expect(killed.success).toBe(true);
  expect(killed.warnings?.join()).toContain("uncommitted file(s) (app.txt)");
  expect(file(c.worktree.path)).toBe("half\n");
  const resumed = await leaderCalls<Result & { agentId: string; worktree: AgentWorktree }>("resume-agent", {
    teamName: TEAM,
    agentId: c.agentId,
    prompt: [bash("git add app.txt && git commit -qm 'c: finish'"), completeCall].join("\n"),
  });
  expect(resumed.success).toBe(true);
  expect(resumed.worktree).toEqual(c.worktree);
  await until(resumed.agentId, (s) => s.status === "terminated", "resumed c to complete");
  expect((await agentState(resumed.agentId)).outcome).toBe("completed");
  expect(git(c.worktree.path, "log", "-1", "--format=%s")).toBe("c: finish");
  expect(git(c.worktree.path, "status", "--porcelain")).toBe("");
}, 110_000);

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { identityText } from "../../src/operations/team/identity-prompt.ts";
import { sparesSettled } from "../../src/operations/worktrees/spare.ts";
import type { AgentState, AgentWorktree } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { commitFile, git, initRepo } from "../helpers/git.ts";
import type { Spawned } from "../helpers/spare.ts";
import { agentOnDisk, leadTeam } from "../helpers/team.ts";

const LEADER = "ses_lead";

type Result = { success: boolean; error?: string; warnings?: string[] } & Record<string, unknown>;

let ctx: TestContext;
let call: Awaited<ReturnType<typeof leadTeam>>["call"];
let base: string;

async function setUp(options: Parameters<typeof makeTestContext>[0] = {}, repo = true) {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, ...options });
  if (repo) base = await initRepo(ctx.projectRoot);
  ({ call } = await leadTeam(ctx, "alpha", LEADER));
}

afterEach(() => ctx.cleanup());

const spawn = (args: Record<string, unknown> = {}) =>
  call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "Edit app.txt", worktree: true, ...args },
    LEADER,
  );
const kill = (agentId: string) =>
  call<Result>("kill-agent", { teamName: "alpha", agentId, force: true }, LEADER);
const merge = (agentId: string, args: Record<string, unknown> = {}) =>
  call<Result>("merge-agent", { teamName: "alpha", agentId, ...args }, LEADER);
const complete = (agent: Spawned) =>
  call<Result>(
    "complete-agent",
    { teamName: "alpha", agentId: agent.agentId, status: "completed", summary: "done" },
    agent.sessionId,
  );
const app = (dir: string) => readFile(path.join(dir, "app.txt"), "utf8");
const branches = () => git(ctx.projectRoot, "branch", "--list", "--format=%(refname:short)").split("\n");

async function spawnOk(args: Record<string, unknown> = {}): Promise<Spawned & { worktree: AgentWorktree }> {
  const spawned = await spawn(args);
  if (!spawned.success || !spawned.worktree) throw new Error(`spawn failed: ${spawned.error}`);
  return { ...spawned, worktree: spawned.worktree };
}

describe("spawn-agent worktree", () => {
  beforeEach(() => setUp());

  test("the agent gets a worktree on teams/<team>/<name> from the leader's HEAD; session, pane, state, status show it", async () => {
    const agent = await spawnOk();
    const dir = path.join(ctx.store.paths.worktreesDir, "alpha", agent.name);
    expect(agent.worktree).toEqual({ path: dir, branch: `teams/alpha/${agent.name}`, base });
    expect(git(dir, "rev-parse", "--abbrev-ref", "HEAD")).toBe(`teams/alpha/${agent.name}`);
    expect(ctx.server.sessions.get(agent.sessionId)?.directory).toBe(dir);
    expect([...ctx.tmux.panes.values()][0]?.spec.cwd).toBe(dir);
    const state = await agentOnDisk(ctx, agent);
    expect(state.cwd).toBe(dir);
    expect(state.worktree).toEqual(agent.worktree);
    // The storage dir ignores itself: the leader's checkout does not see the worktree.
    expect(git(ctx.projectRoot, "status", "--porcelain")).toBe("");
    const status = await call<{ agents: { worktree?: AgentWorktree }[] }>(
      "get-agent-status",
      { teamName: "alpha", agentId: agent.agentId },
      LEADER,
    );
    expect(status.agents[0]?.worktree).toEqual(agent.worktree);
    const listed = await call<{ agents: { agent_id: string; metadata: { worktree: unknown } }[] }>(
      "list-agents",
      { teamName: "alpha", grouped: false },
      LEADER,
    );
    const row = listed.agents.find((a) => a.agent_id === agent.agentId);
    expect(row?.metadata.worktree).toEqual(agent.worktree);
    const history = JSON.parse(await readFile(ctx.store.paths.history("alpha"), "utf8"));
    expect(history.entries[0].worktree).toEqual(agent.worktree);
    const prompt = identityText(state, { leader: "x" } as never, ctx.options);
    expect(prompt).toContain(`- worktree: ${dir}`);
    expect(prompt).toContain(`Commit your work on branch teams/alpha/${agent.name}`);
  });

  test("a branch name, the team default, a cwd inside the project mapped into the worktree", async () => {
    await mkdir(path.join(ctx.projectRoot, "pkg"));
    await commitFile(ctx.projectRoot, "pkg/x.txt", "x\n", "pkg");
    await call("create-team", { teamName: "beta", worktrees: true }, "ses_beta");
    const named = await spawnOk({ worktree: "feature/login", cwd: "pkg", name: "dev" });
    expect(named.worktree.branch).toBe("feature/login");
    expect((await agentOnDisk(ctx, named)).cwd).toBe(path.join(named.worktree.path, "pkg"));
    const byDefault = await call<Spawned>("spawn-agent", { teamName: "beta", prompt: "p" }, "ses_beta");
    expect(byDefault.worktree?.branch).toBe(`teams/beta/${byDefault.name}`);
    const without = await call<Spawned>(
      "spawn-agent",
      { teamName: "beta", prompt: "p", worktree: false },
      "ses_beta",
    );
    expect(without.worktree).toBeUndefined();
  });

  test("refusals leave nothing behind: bad branch name, existing branch, existing directory", async () => {
    const bad = await spawn({ worktree: "has space" });
    expect(bad.error).toContain("Invalid branch name");
    const dash = await spawn({ worktree: "-f" });
    expect(dash.error).toContain("Invalid branch name");
    git(ctx.projectRoot, "branch", "taken");
    const taken = await spawn({ worktree: "taken" });
    expect(taken.error).toContain("Branch 'taken' already exists");
    await mkdir(path.join(ctx.store.paths.worktreesDir, "alpha", "worker-1"), { recursive: true });
    const dirTaken = await spawn();
    expect(dirTaken.error).toContain("already exists");
    expect(branches().sort()).toEqual(["main", "taken"]);
    const { items } = await ctx.store.listAgentViews("alpha");
    expect(items.map((v) => v.state.role)).toEqual(["leader"]);
    expect(ctx.server.sessions.size).toBe(0);
  });

  test("a failed spawn rolls back the worktree and the branch it made", async () => {
    ctx.tmux.failOpen = true;
    const failed = await spawn();
    expect(failed.success).toBe(false);
    expect(existsSync(path.join(ctx.store.paths.worktreesDir, "alpha", "worker-1"))).toBe(false);
    expect(branches()).toEqual(["main"]);
    // Beside the leader's checkout, only the team's spare (made after the spawn, in the background).
    await sparesSettled(ctx);
    const listed = git(ctx.projectRoot, "worktree", "list", "--porcelain").match(/^worktree .*$/gm) ?? [];
    expect(listed.filter((line) => !line.includes("/.spare-"))).toHaveLength(1);
  });
});

describe("spawn-agent worktree outside a repository", () => {
  beforeEach(() => setUp({}, false));
  test("is refused with a clear error, nothing created", async () => {
    const refused = await spawn();
    expect(refused.error).toContain("is not inside a git repository");
    expect(ctx.server.sessions.size).toBe(0);
    expect(existsSync(ctx.store.paths.worktreesDir)).toBe(false);
  });
});

describe("bringing the work home", () => {
  beforeEach(() => setUp());

  test("two agents change one file: isolated, the first merge lands, the second conflicts and changes nothing", async () => {
    const a = await spawnOk({ name: "a" });
    const b = await spawnOk({ name: "b" });
    await commitFile(a.worktree.path, "app.txt", "from a\n", "a: edit app");
    await commitFile(b.worktree.path, "app.txt", "from b\n", "b: edit app");
    expect(await app(a.worktree.path)).toBe("from a\n");
    expect(await app(b.worktree.path)).toBe("from b\n");
    expect(await app(ctx.projectRoot)).toBe("v1\n");

    const diff = await call<Result & { ahead: number; commits: { subject: string }[]; diffStat: string }>(
      "agent-diff",
      { teamName: "alpha", agentId: a.agentId },
      a.sessionId,
    );
    expect(diff).toMatchObject({ success: true, ahead: 1, uncommitted: [] });
    expect(diff.commits[0]?.subject).toBe("a: edit app");
    expect(diff.diffStat).toContain("app.txt");

    expect((await merge(a.agentId)).error).toContain("is active");
    await complete(a);
    await complete(b);
    const first = await merge(a.agentId);
    expect(first).toMatchObject({ success: true, into: "main", files: ["app.txt"], worktreeRemoved: true });
    expect(await app(ctx.projectRoot)).toBe("from a\n");
    expect(existsSync(a.worktree.path)).toBe(false);

    const head = git(ctx.projectRoot, "rev-parse", "HEAD");
    const second = await merge(b.agentId);
    expect(second.success).toBe(false);
    expect(second.error).toContain("would conflict in: app.txt");
    expect(git(ctx.projectRoot, "rev-parse", "HEAD")).toBe(head);
    expect(git(ctx.projectRoot, "status", "--porcelain")).toBe("");
    expect(existsSync(b.worktree.path)).toBe(true);
  });

  test("refused while the leader has uncommitted changes to an involved file; a squash merge otherwise", async () => {
    const a = await spawnOk();
    await commitFile(a.worktree.path, "new.txt", "n\n", "add new");
    await commitFile(a.worktree.path, "app.txt", "v2\n", "edit app");
    await complete(a);
    await writeFile(path.join(ctx.projectRoot, "app.txt"), "leader's edit\n");
    const refused = await merge(a.agentId);
    expect(refused.error).toContain("uncommitted changes to files the merge touches: app.txt");
    expect(await app(ctx.projectRoot)).toBe("leader's edit\n");
    git(ctx.projectRoot, "checkout", "--", "app.txt");
    await writeFile(path.join(ctx.projectRoot, "other.txt"), "untouched\n");
    const squashed = await merge(a.agentId, { strategy: "squash", message: "Bring a home" });
    expect(squashed).toMatchObject({ success: true, strategy: "squash", worktreeRemoved: true });
    expect(git(ctx.projectRoot, "log", "-1", "--format=%s")).toBe("Bring a home");
    expect(git(ctx.projectRoot, "rev-list", "--count", "HEAD")).toBe("2");
    expect(branches()).toEqual(["main"]);
  });

  test("force merges what a running agent committed and keeps its worktree", async () => {
    const a = await spawnOk();
    await commitFile(a.worktree.path, "app.txt", "v2\n", "edit app");
    const merged = await merge(a.agentId, { force: true });
    expect(merged).toMatchObject({ success: true, worktreeRemoved: false });
    expect(existsSync(a.worktree.path)).toBe(true);
  });
});

describe("never lose work", () => {
  test("a clean, unchanged worktree is removed when its agent ends; keepWorktrees keeps it", async () => {
    await setUp();
    const a = await spawnOk();
    await complete(a);
    expect(existsSync(a.worktree.path)).toBe(false);
    expect(branches()).toEqual(["main"]);
    await ctx.cleanup();
    await setUp({ keepWorktrees: true });
    const kept = await spawnOk();
    await kill(kept.agentId);
    expect(existsSync(kept.worktree.path)).toBe(true);
  });

  test("kill keeps a dirty worktree and one with unmerged commits; resume continues in it, recreated when removed", async () => {
    await setUp();
    const dirty = await spawnOk({ name: "dirty" });
    await writeFile(path.join(dirty.worktree.path, "app.txt"), "half done\n");
    const killed = await kill(dirty.agentId);
    expect(killed.warnings?.join()).toContain("1 uncommitted file(s) (app.txt)");
    expect(await app(dirty.worktree.path)).toBe("half done\n");

    const resumed = await call<Spawned>(
      "resume-agent",
      { teamName: "alpha", agentId: dirty.agentId },
      LEADER,
    );
    expect(resumed.success).toBe(true);
    expect(resumed.worktree).toEqual(dirty.worktree);
    expect((await agentOnDisk(ctx, resumed)).cwd).toBe(dirty.worktree.path);
    expect(ctx.server.sessions.get(resumed.sessionId)?.directory).toBe(dirty.worktree.path);
    expect(await app(dirty.worktree.path)).toBe("half done\n");

    const committed = await spawnOk({ name: "committed" });
    await commitFile(committed.worktree.path, "app.txt", "done\n", "work");
    await kill(committed.agentId);
    expect(existsSync(committed.worktree.path)).toBe(true);
    // Removed by hand: resume puts the branch back in place.
    git(ctx.projectRoot, "worktree", "remove", "--", committed.worktree.path);
    const again = await call<Spawned>(
      "resume-agent",
      { teamName: "alpha", agentId: committed.agentId },
      LEADER,
    );
    expect(again.success).toBe(true);
    expect(await app(committed.worktree.path)).toBe("done\n");
  });

  test("resume refuses a worktree record edited to point elsewhere", async () => {
    await setUp();
    const a = await spawnOk();
    await writeFile(path.join(a.worktree.path, "app.txt"), "dirty\n");
    await kill(a.agentId);
    await ctx.store.updateAgent("alpha", a.agentId, (state) =>
      state
        ? { ...state, worktree: { ...a.worktree, path: ctx.projectRoot }, cwd: ctx.projectRoot }
        : undefined,
    );
    const refused = await call<Result>("resume-agent", { teamName: "alpha", agentId: a.agentId }, LEADER);
    expect(refused.error).toContain("is not inside the agent's worktree");
  });

  test("a worktree directory or branch deleted under a live agent shows as a warning in its status", async () => {
    await setUp();
    const a = await spawnOk();
    await rm(a.worktree.path, { recursive: true, force: true });
    const status = await call<Result & { agents: AgentState[] }>(
      "get-agent-status",
      { teamName: "alpha", agentId: a.agentId },
      LEADER,
    );
    expect(status.success).toBe(true);
    expect(status.warnings?.join()).toContain(`worktree directory ${a.worktree.path} is gone`);
    git(ctx.projectRoot, "worktree", "prune");
    git(ctx.projectRoot, "branch", "-D", a.worktree.branch);
    const after = await call<Result>("get-agent-status", { teamName: "alpha" }, LEADER);
    expect(after.warnings?.join()).toContain(`worktree branch ${a.worktree.branch} is gone`);
    // Ending it does not crash either.
    expect((await kill(a.agentId)).success).toBe(true);
  });
});

describe("CLI", () => {
  beforeEach(() => setUp());
  const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
  async function cli(args: string[]) {
    const child = Bun.spawn([process.execPath, CLI, ...args, "--dir", ctx.projectRoot], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, NO_COLOR: "1" },
    });
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { stdout, stderr, code };
  }

  test("worktrees lists agent, branch, ahead, dirty, path; diff shows commits and uncommitted files", async () => {
    const a = await spawnOk({ name: "a" });
    await commitFile(a.worktree.path, "app.txt", "v2\n", "edit app");
    await writeFile(path.join(a.worktree.path, "scratch.txt"), "wip\n");
    const listed = await cli(["worktrees"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^AGENT\s+STATUS\s+BRANCH\s+AHEAD\s+DIRTY\s+PATH$/m);
    expect(listed.stdout).toContain(`alpha/a  active  teams/alpha/a  1      1      ${a.worktree.path}`);
    const diff = await cli(["diff", "alpha", "a"]);
    expect(diff.code).toBe(0);
    expect(diff.stdout).toContain("1 commit(s) ahead of base:");
    expect(diff.stdout).toContain("edit app");
    expect(diff.stdout).toContain("app.txt | 2 +-");
    expect(diff.stdout).toContain("uncommitted (not merged by merge-agent): scratch.txt");
    const missing = await cli(["diff", "alpha", "nobody"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("No agent 'nobody' in team 'alpha'");
  });
});

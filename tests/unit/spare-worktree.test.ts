import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { collectWorktrees } from "../../src/cli/worktrees.ts";
import { claimSpare, refillSpare, spareDir, sparesSettled } from "../../src/operations/worktrees/spare.ts";
import type { AgentWorktree } from "../../src/state/schemas.ts";
import type { TestContext } from "../helpers/context.ts";
import { commitFile, git } from "../helpers/git.ts";
import { lockExists } from "../helpers/locks.ts";
import {
  entries as entriesOf,
  expectFreshWorktree as expectFresh,
  inode,
  LEADER,
  readySpare as readyIn,
  type SpareTeam,
  type Spawned,
  spareTeam,
  spawnOk as spawnIn,
  teamDir as teamDirOf,
} from "../helpers/spare.ts";

// The team's spare worktree (specs/worktrees.md, "The spare"): spawn-agent with a worktree takes a checkout made
// beforehand in the background instead of checking out while the leader waits.

let team: SpareTeam;
let ctx: TestContext;
let call: SpareTeam["call"];
let base: string;

async function setUp(options: Parameters<typeof spareTeam>[0] = {}) {
  team = await spareTeam(options);
  ({ ctx, call, base } = team);
}

afterEach(() => ctx.cleanup());

const teamDir = () => teamDirOf(ctx);
const entries = () => entriesOf(ctx);
const spawnOk = (args: Record<string, unknown> = {}) => spawnIn(team, args);
const readySpare = (commit = base) => readyIn(ctx, commit);
const expectFreshWorktree = (agent: Spawned & { worktree: AgentWorktree }, commit = base, cwdInRepo = "") =>
  expectFresh(ctx, agent, commit, cwdInRepo);

describe("the spare worktree", () => {
  beforeEach(() => setUp());

  test("create-team with worktrees makes one; spawn-agent takes it as the agent's worktree, then a new one is made", async () => {
    const spare = await readySpare();
    expect(git(spare.dir, "status", "--porcelain")).toBe("");
    const agent = await spawnOk({ cwd: "lib" });
    await expectFreshWorktree(agent, base, "lib");
    // The very files of the spare: moved, not checked out again.
    expect(inode(agent.worktree.path)).toBe(spare.ino);
    expect(await readFile(path.join(agent.worktree.path, "app.txt"), "utf8")).toBe("v1\n");
    const next = await readySpare();
    expect(next.ino).not.toBe(spare.ino);
    expect(entries()).toEqual([agent.name, path.basename(next.dir)].sort());
    // Spares are no agents: list-agents and the CLI's worktrees show the agent only.
    const listed = await call<{ agents: { name: string }[] }>(
      "list-agents",
      { teamName: "alpha", grouped: false },
      LEADER,
    );
    expect(listed.agents.map((a) => a.name).sort()).toEqual(["leader", agent.name]);
    expect((await collectWorktrees(ctx, "alpha")).map((row) => row.path)).toEqual([agent.worktree.path]);
  });

  test("ending the agent removes its worktree as before; the spare stays", async () => {
    const spare = await readySpare();
    const agent = await spawnOk();
    expect(inode(agent.worktree.path)).toBe(spare.ino);
    const next = await readySpare();
    const killed = await call<{ success: boolean }>(
      "kill-agent",
      { teamName: "alpha", agentId: agent.agentId, force: true },
      LEADER,
    );
    expect(killed.success).toBe(true);
    expect(existsSync(agent.worktree.path)).toBe(false);
    expect(git(ctx.projectRoot, "branch", "--list", "--format=%(refname:short)")).toBe("main");
    expect(entries()).toEqual([path.basename(next.dir)].sort());
  });

  test("a failed spawn that took the spare rolls back its worktree and branch", async () => {
    const spare = await readySpare();
    ctx.tmux.failOpen = true;
    const failed = await call<Spawned>("spawn-agent", { teamName: "alpha", prompt: "work" }, LEADER);
    expect(failed.success).toBe(false);
    expect(ctx.logs.map((line) => line.message)).toContain(
      `spare worktree ${spare.dir} taken as ${path.join(teamDir(), "worker-1")}`,
    );
    expect(existsSync(path.join(teamDir(), "worker-1"))).toBe(false);
    expect(git(ctx.projectRoot, "branch", "--list", "--format=%(refname:short)")).toBe("main");
    // (Inodes say nothing here: the spare's were freed by the rollback and may be reused by the next one.)
    const next = await readySpare();
    expect(entries()).toEqual([path.basename(next.dir)].sort());
  });

  test("a spare of a commit that is no longer HEAD is not used; the refill replaces it", async () => {
    const old = await readySpare();
    await commitFile(ctx.projectRoot, "app.txt", "v2\n", "leader moves on");
    const head = git(ctx.projectRoot, "rev-parse", "HEAD");
    const agent = await spawnOk();
    await expectFreshWorktree(agent, head);
    expect(inode(agent.worktree.path)).not.toBe(old.ino);
    expect(await readFile(path.join(agent.worktree.path, "app.txt"), "utf8")).toBe("v2\n");
    const next = await readySpare(head);
    expect(git(next.dir, "rev-parse", "HEAD")).toBe(head);
    // The stale one was ours and clean: removed, nothing set aside.
    expect(entries()).toEqual([agent.name, path.basename(next.dir)].sort());
  });

  test("merge-agent moves HEAD: the spare of the new HEAD is made at once", async () => {
    const agent = await spawnOk();
    await commitFile(agent.worktree.path, "app.txt", "v2\n", "agent's work");
    await call(
      "complete-agent",
      { teamName: "alpha", agentId: agent.agentId, status: "completed", summary: "done" },
      agent.sessionId,
    );
    await sparesSettled(ctx);
    const merged = await call<{ success: boolean; commit: string }>(
      "merge-agent",
      { teamName: "alpha", agentId: agent.agentId },
      LEADER,
    );
    expect(merged.success).toBe(true);
    const spare = await readySpare(merged.commit);
    expect(await readFile(path.join(spare.dir, "app.txt"), "utf8")).toBe("v2\n");
    expect(entries()).toEqual([path.basename(spare.dir)]);
  });

  test("a refill retires the stale spares of other teams too (a team long done keeps none for ever)", async () => {
    await call("create-team", { teamName: "beta", worktrees: true }, "ses_beta");
    await readySpare();
    const betaDir = path.join(ctx.store.paths.worktreesDir, "beta");
    expect(readdirSync(betaDir)).toEqual([`.spare-${base}`]);
    await commitFile(ctx.projectRoot, "app.txt", "v2\n", "leader moves on");
    const agent = await spawnOk();
    const head = git(ctx.projectRoot, "rev-parse", "HEAD");
    await readySpare(head);
    expect(readdirSync(betaDir)).toEqual([]);
    expect(entries()).toEqual([agent.name, `.spare-${head}`].sort());
  });

  test("a spare written into is set aside, never used nor deleted", async () => {
    const spare = await readySpare();
    await writeFile(path.join(spare.dir, "app.txt"), "someone's edit\n");
    await writeFile(path.join(spare.dir, "notes.txt"), "someone's notes\n");
    const agent = await spawnOk();
    await expectFreshWorktree(agent);
    expect(inode(agent.worktree.path)).not.toBe(spare.ino);
    expect(await readFile(path.join(agent.worktree.path, "app.txt"), "utf8")).toBe("v1\n");
    const next = await readySpare();
    const aside = entries().filter((name) => name.startsWith(".set-aside-"));
    expect(aside).toHaveLength(1);
    const asideDir = path.join(teamDir(), aside[0] as string);
    expect(await readFile(path.join(asideDir, "notes.txt"), "utf8")).toBe("someone's notes\n");
    expect(inode(asideDir)).toBe(spare.ino);
    // Later spawns take the new spare, never the one set aside, and the refills leave it alone.
    const second = await spawnOk();
    expect(inode(second.worktree.path)).toBe(next.ino);
    await sparesSettled(ctx);
    expect(existsSync(path.join(asideDir, "notes.txt"))).toBe(true);
  });

  test("two spawns at once, one spare: both get a worktree of their own, exactly one of them the spare", async () => {
    const spare = await readySpare();
    const [a, b] = await Promise.all([spawnOk({ name: "a" }), spawnOk({ name: "b" })]);
    await expectFreshWorktree(a);
    await expectFreshWorktree(b);
    expect([inode(a.worktree.path), inode(b.worktree.path)].filter((ino) => ino === spare.ino)).toHaveLength(
      1,
    );
    await readySpare();
  });

  test("leftovers of a maker that died (.making-<pid>-*) are never used; a later maker removes the complete, clean ones", async () => {
    const spare = await readySpare();
    const leftover = (name: string) => path.join(teamDir(), name);
    // Above the largest pid Linux hands out: no process has it.
    const dead = 2 ** 22 + 17;
    // A crash after the checkout, before the rename: complete, registered, not under the ready name.
    git(ctx.projectRoot, "worktree", "move", spare.dir, leftover(`.making-${dead}-done`));
    // Killed mid-checkout: git keeps it locked. Written into after the crash. Of a maker still running (this process).
    git(ctx.projectRoot, "worktree", "add", "--quiet", "--detach", leftover(`.making-${dead}-half`));
    git(ctx.projectRoot, "worktree", "lock", "--reason", "initializing", leftover(`.making-${dead}-half`));
    git(ctx.projectRoot, "worktree", "add", "--quiet", "--detach", leftover(`.making-${dead}-edited`));
    await writeFile(path.join(leftover(`.making-${dead}-edited`), "app.txt"), "edited\n");
    git(ctx.projectRoot, "worktree", "add", "--quiet", "--detach", leftover(`.making-${process.pid}-live`));
    const agent = await spawnOk();
    await expectFreshWorktree(agent);
    expect(inode(agent.worktree.path)).not.toBe(spare.ino);
    const next = await readySpare();
    const aside = entries().filter((name) => name.startsWith(".set-aside-"));
    expect(entries()).toEqual(
      [
        `.making-${dead}-half`,
        `.making-${process.pid}-live`,
        ...aside,
        agent.name,
        path.basename(next.dir),
      ].sort(),
    );
    expect(aside).toHaveLength(1);
    expect(await readFile(path.join(teamDir(), aside[0] as string, "app.txt"), "utf8")).toBe("edited\n");
  });

  test("a maker lock of a live process keeps this one from making a spare; one of a dead process does not", async () => {
    await readySpare();
    const agent = await spawnOk();
    await sparesSettled(ctx);
    await call("kill-agent", { teamName: "alpha", agentId: agent.agentId, force: true }, LEADER);
    git(ctx.projectRoot, "worktree", "remove", spareDir(ctx, "alpha", base));
    const lock = `${ctx.store.paths.spareLock("alpha")}.lock`;
    await writeFile(lock, `${process.pid} ${hostname()} 0123456789abcdef`);
    refillSpare(ctx, "alpha");
    await sparesSettled(ctx);
    expect(entries()).toEqual([].sort());
    // A pid that no process has: its holder died mid-way.
    await writeFile(lock, `${2 ** 22 + 17} ${hostname()} 0123456789abcdef`);
    refillSpare(ctx, "alpha");
    await readySpare();
    expect(lockExists(lock)).toBe(false);
  });

  test("a maker started after the team's directory was removed leaves nothing behind and says why", async () => {
    await readySpare();
    const gone = ctx.store.paths.teamDir("alpha");
    await rm(gone, { recursive: true, force: true });
    refillSpare(ctx, "alpha");
    await sparesSettled(ctx);
    expect(existsSync(gone)).toBe(false);
    const warned = ctx.logs.filter((l) => l.level === "warn").map((l) => l.message);
    expect(warned.some((m) => m.includes("No directory for the lock"))).toBe(true);
  });
});

describe("without spares", () => {
  test("spareWorktrees: false makes none and spawns check out as before", async () => {
    await setUp({ spareWorktrees: false });
    await sparesSettled(ctx);
    expect(entries()).toEqual([].sort());
    const agent = await spawnOk();
    await expectFreshWorktree(agent);
    await sparesSettled(ctx);
    expect(entries()).toEqual([agent.name].sort());
  });

  test("a team without the worktrees default gets its spare after its first spawn with a worktree", async () => {
    await setUp();
    await call("create-team", { teamName: "beta" }, "ses_beta");
    await sparesSettled(ctx);
    const betaDir = path.join(ctx.store.paths.worktreesDir, "beta");
    expect(existsSync(betaDir)).toBe(false);
    const spawned = await call<Spawned>(
      "spawn-agent",
      { teamName: "beta", prompt: "p", worktree: true },
      "ses_beta",
    );
    expect(spawned.success).toBe(true);
    await sparesSettled(ctx);
    expect(readdirSync(betaDir).sort()).toEqual([`.spare-${base}`, spawned.name]);
  });
});

describe("a repository whose fresh checkouts are not clean", () => {
  test("a post-checkout hook that writes a file: the fresh spare is removed at once, no more are made, spawns check out", async () => {
    team = await spareTeam({}, async (repo) => {
      const hook = path.join(repo, ".git", "hooks", "post-checkout");
      await writeFile(hook, "#!/bin/sh\necho generated > generated.txt\n", { mode: 0o755 });
    });
    ({ ctx, call, base } = team);
    await sparesSettled(ctx);
    // Nothing is left of it: no spare, no half-made or set-aside checkout.
    expect(entries()).toEqual([]);
    const first = await spawnOk();
    await sparesSettled(ctx);
    const second = await spawnOk();
    await sparesSettled(ctx);
    expect(entries()).toEqual([first.name, second.name].sort());
    expect(git(ctx.projectRoot, "worktree", "list", "--porcelain")).not.toContain(".spare-");
    expect(first.worktree).toMatchObject({ branch: `teams/alpha/${first.name}`, base });
  });
});

describe("a claim that meets a directory made at the same moment", () => {
  test("git moves the spare inside it: the spare goes back, the other agent's worktree is left as it is", async () => {
    await setUp();
    const spare = await readySpare();
    // Another spawn of the same name checked out its worktree between this spawn's check and its move.
    const dir = path.join(teamDir(), "alice");
    git(ctx.projectRoot, "worktree", "add", "--quiet", "-b", "teams/alpha/alice", "--", dir, base);
    await writeFile(path.join(dir, "work.txt"), "alice's work\n");
    const claimed = await claimSpare(ctx, {
      repo: ctx.projectRoot,
      base,
      teamName: "alpha",
      dir,
      branch: "teams/alpha/alice-2",
    });
    expect(claimed).toBe(false);
    expect(await readFile(path.join(dir, "work.txt"), "utf8")).toBe("alice's work\n");
    expect(git(dir, "branch", "--show-current")).toBe("teams/alpha/alice");
    expect(inode(spare.dir)).toBe(spare.ino);
    expect(entries()).toEqual([path.basename(spare.dir), "alice"].sort());
  });
});

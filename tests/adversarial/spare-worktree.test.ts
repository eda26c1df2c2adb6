import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, lstatSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sparesSettled } from "../../src/operations/worktrees/spare.ts";
import { git, initRepo } from "../helpers/git.ts";
import {
  entries,
  expectFreshWorktree,
  inode,
  readySpare,
  type SpareTeam,
  spareTeam,
  spawnOk,
  teamDir,
} from "../helpers/spare.ts";

// The spare worktree is claimed by a rename that many spawns may race for, and it sits on disk between spawns where
// anyone may write into it, replace it or point it elsewhere. Whatever is found there, every spawn gets a worktree
// exactly as `git worktree add -b` makes it, and nothing anyone put there is deleted.

let team: SpareTeam;
let spare: { dir: string; ino: number };
const outside: string[] = [];

beforeEach(async () => {
  team = await spareTeam();
  spare = await readySpare(team.ctx, team.base);
});
afterEach(async () => {
  await team.ctx.cleanup();
  await Promise.all(outside.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("racing for the spare", () => {
  test("five spawns at once, one spare: five distinct worktrees, exactly one of them the spare", async () => {
    const agents = await Promise.all(["a", "b", "c", "d", "e"].map((name) => spawnOk(team, { name })));
    for (const agent of agents) await expectFreshWorktree(team.ctx, agent, team.base);
    const taken = agents.filter((agent) => inode(agent.worktree.path) === spare.ino);
    expect(taken).toHaveLength(1);
    expect(new Set(agents.map((agent) => agent.worktree.path)).size).toBe(5);
    await sparesSettled(team.ctx);
    expect(entries(team.ctx).filter((name) => name.startsWith("."))).toHaveLength(1);
  });

  test("spawns while the refill is still checking out: each gets a clean worktree, one spare is left", async () => {
    const first = await spawnOk(team, { name: "first" });
    // No wait: the maker started by the first spawn is at work.
    const [second, third] = await Promise.all([
      spawnOk(team, { name: "second" }),
      spawnOk(team, { name: "third" }),
    ]);
    for (const agent of [first, second, third]) await expectFreshWorktree(team.ctx, agent, team.base);
    await sparesSettled(team.ctx);
    const left = entries(team.ctx).filter((name) => name.startsWith("."));
    expect(left).toEqual([`.spare-${team.base}`]);
    expect(git(path.join(teamDir(team.ctx), left[0] as string), "status", "--porcelain")).toBe("");
  });
});

describe("a spare that is not what it was", () => {
  /** One spawn with a worktree that must not be the spare; then the refill has left a fresh spare. */
  async function spawnPastIt(): Promise<void> {
    const agent = await spawnOk(team);
    await expectFreshWorktree(team.ctx, agent, team.base);
    expect(existsSync(spare.dir) ? inode(agent.worktree.path) !== spare.ino : true).toBe(true);
  }
  const setAside = () => entries(team.ctx).filter((name) => name.startsWith(".set-aside-"));
  const asideDir = () => path.join(teamDir(team.ctx), setAside()[0] as string);

  test("a tracked file changed: set aside with the change", async () => {
    await writeFile(path.join(spare.dir, "lib", "util.txt"), "edited\n");
    await spawnPastIt();
    expect(setAside()).toHaveLength(1);
    expect(await readFile(path.join(asideDir(), "lib", "util.txt"), "utf8")).toBe("edited\n");
  });

  test("an untracked file added: set aside with the file", async () => {
    await writeFile(path.join(spare.dir, "draft.md"), "draft\n");
    await spawnPastIt();
    expect(await readFile(path.join(asideDir(), "draft.md"), "utf8")).toBe("draft\n");
  });

  test("a commit made in it: set aside, the commit still its HEAD", async () => {
    git(
      spare.dir,
      "-c",
      "user.name=x",
      "-c",
      "user.email=x@example.invalid",
      "commit",
      "--quiet",
      "--allow-empty",
      "-m",
      "in the spare",
    );
    const made = git(spare.dir, "rev-parse", "HEAD");
    await spawnPastIt();
    expect(git(asideDir(), "rev-parse", "HEAD")).toBe(made);
  });

  test("switched to a branch: set aside, the branch untouched", async () => {
    git(spare.dir, "switch", "--quiet", "-c", "rogue");
    await spawnPastIt();
    expect(git(asideDir(), "symbolic-ref", "--short", "HEAD")).toBe("rogue");
    expect(git(team.ctx.projectRoot, "rev-parse", "rogue")).toBe(team.base);
  });

  test("locked by hand: not claimed, not removed", async () => {
    git(team.ctx.projectRoot, "worktree", "lock", "--reason", "mine", spare.dir);
    await spawnPastIt();
    expect(git(spare.dir, "rev-parse", "HEAD")).toBe(team.base);
  });

  test("replaced by a plain directory: left alone, and no spare is checked out over and over", async () => {
    git(team.ctx.projectRoot, "worktree", "move", spare.dir, path.join(teamDir(team.ctx), "..", "kept"));
    await mkdir(spare.dir);
    await writeFile(path.join(spare.dir, "app.txt"), "not a worktree\n");
    await spawnPastIt();
    await sparesSettled(team.ctx);
    expect(await readFile(path.join(spare.dir, "app.txt"), "utf8")).toBe("not a worktree\n");
    expect(
      entries(team.ctx).filter((name) => name.startsWith(".") && name !== path.basename(spare.dir)),
    ).toEqual([]);
    expect(team.ctx.logs.some((line) => line.message.includes("is not a worktree of this repository"))).toBe(
      true,
    );
  });

  test("a symlink to the leader's checkout: never moved, the checkout untouched", async () => {
    git(team.ctx.projectRoot, "worktree", "remove", spare.dir);
    await symlink(team.ctx.projectRoot, spare.dir);
    await spawnPastIt();
    expect(lstatSync(spare.dir).isSymbolicLink()).toBe(true);
    expect(git(team.ctx.projectRoot, "status", "--porcelain")).toBe("");
    expect(git(team.ctx.projectRoot, "symbolic-ref", "--short", "HEAD")).toBe("main");
  });

  test("a worktree of another repository: not claimed, left where it is", async () => {
    git(team.ctx.projectRoot, "worktree", "remove", spare.dir);
    const other = await mkdtemp(path.join(tmpdir(), "oct-other-"));
    outside.push(other);
    await initRepo(other, { "app.txt": "other\n" });
    git(other, "worktree", "add", "--quiet", "--detach", spare.dir);
    await spawnPastIt();
    expect(await readFile(path.join(spare.dir, "app.txt"), "utf8")).toBe("other\n");
    expect(git(spare.dir, "rev-parse", "--git-common-dir")).toBe(path.join(other, ".git"));
  });
});

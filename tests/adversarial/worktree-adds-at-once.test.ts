import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { GitCli } from "../../src/edges/git.ts";

// Many worktrees of one repository made at once (concurrent spawns, the spare's refill beside them): git's own
// `worktree add` reads every other worktree's entry, and one still being written made it die.

let dir: string;
const git = new GitCli();

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "oct-wt-race-"));
  const repo = path.join(dir, "repo");
  const sh = (args: string[]) => Bun.spawnSync(["git", "-C", repo, ...args], { stderr: "pipe" });
  Bun.spawnSync(["git", "init", "-q", repo]);
  await Bun.write(path.join(repo, "a.txt"), "a\n");
  sh(["add", "a.txt"]);
  sh(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"]);
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test("twelve worktrees added at once, branches and detached: every add succeeds", async () => {
  const repo = path.join(dir, "repo");
  const head = (await git.headCommit(repo)) ?? "";
  for (let round = 0; round < 3; round++) {
    const adds = Array.from({ length: 12 }, (_, i) => {
      const where = path.join(dir, `w${round}-${i}`);
      return i % 2 === 0
        ? git.addWorktree(repo, where, `b${round}-${i}`, head)
        : git.addDetachedWorktree(repo, where, head);
    });
    const results = await Promise.allSettled(adds);
    expect(results.filter((r) => r.status === "rejected").map((r) => String(r.reason))).toEqual([]);
  }
  expect(await git.listWorktrees(repo)).toHaveLength(37);
});

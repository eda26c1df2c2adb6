import { afterEach, beforeEach, expect, test } from "bun:test";
import { existsSync } from "node:fs";
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

test("two processes adding worktrees at the same instant: every add succeeds (they take turns on the storage lock)", async () => {
  const repo = path.join(dir, "repo");
  const script = path.join(import.meta.dir, "fixtures", "worktree-adder.ts");
  const go = path.join(dir, "go");
  for (let round = 0; round < 4; round++) {
    const adders = ["p", "q"].map((name) =>
      Bun.spawn(
        [process.execPath, script, path.join(dir, "storage"), repo, dir, `${name}${round}`, go, "10"],
        { stdout: "pipe", stderr: "pipe" },
      ),
    );
    const outputs = adders.map((adder) => new Response(adder.stdout).text());
    // Both ready (their imports done) before the go, so the adds meet.
    const ready = ["p", "q"].map((name) => `${go}.${name}${round}.ready`);
    while (!ready.every((file) => existsSync(file))) await Bun.sleep(5);
    await Bun.write(go, "go");
    const failures = (await Promise.all(outputs)).map((out) =>
      JSON.parse(out.trim().split("\n").at(-1) ?? "[]"),
    );
    expect(failures).toEqual([[], []]);
    await rm(go);
  }
  expect(await git.listWorktrees(repo)).toHaveLength(81);
});

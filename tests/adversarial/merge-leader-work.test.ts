import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { GitApi } from "../../src/edges/git-api.ts";
import { enforceTimeouts } from "../../src/operations/liveness/timeouts.ts";
import { LockTimeoutError } from "../../src/state/lock.ts";
import type { AgentWorktree } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { commitFile, git, initRepo } from "../helpers/git.ts";
import type { Spawned } from "../helpers/spare.ts";
import { leaderInbox, leadTeam } from "../helpers/team.ts";

// merge-agent works in the leader's own checkout, where the leader keeps work git does not protect: staged changes,
// ignored files (a .env, a local database), untracked directories. Whatever the agent's branch holds and whatever
// fails half-way (a hook, signing, a commit made meanwhile), the leader's files are as they were or the merge is done.

const LEADER = "ses_lead";
type Result = { success: boolean; error?: string; warnings?: string[]; worktreeRemoved?: boolean } & Record<
  string,
  unknown
>;

let ctx: TestContext;
let call: Awaited<ReturnType<typeof leadTeam>>["call"];
let repo: string;
let leaderSession: Awaited<ReturnType<typeof leadTeam>>["leaderSession"];

beforeEach(async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, spareWorktrees: false });
  repo = ctx.projectRoot;
  await initRepo(repo, { "app.txt": "v1\n", ".gitignore": "*.db\nnode_modules/\ndist/\n" });
  ({ call, leaderSession } = await leadTeam(ctx, "alpha", LEADER));
});
afterEach(() => ctx.cleanup());

const merge = (agentId: string, args: Record<string, unknown> = {}) =>
  call<Result>("merge-agent", { teamName: "alpha", agentId, ...args }, LEADER);
const read = (file: string) => readFile(path.join(repo, file), "utf8");
const head = () => git(repo, "rev-parse", "HEAD");
const status = () => git(repo, "status", "--porcelain=v1", "--untracked-files=all");

/** An agent in its own worktree that committed `files` (ignored ones too, as `git add -f` does) and completed. */
async function agentWith(
  files: Record<string, string>,
  name = "a",
): Promise<Spawned & { worktree: AgentWorktree }> {
  const spawned = await call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "work", worktree: true, name },
    LEADER,
  );
  if (!spawned.worktree) throw new Error(`spawn failed: ${spawned.error}`);
  const dir = spawned.worktree.path;
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), content);
    git(dir, "add", "-f", "--", file);
  }
  git(dir, "commit", "--quiet", "-m", `${name}: work`);
  return { ...spawned, worktree: spawned.worktree };
}

async function complete(agent: Spawned): Promise<void> {
  const done = await call<Result>(
    "complete-agent",
    { teamName: "alpha", agentId: agent.agentId, status: "completed", summary: "done" },
    agent.sessionId,
  );
  if (!done.success) throw new Error(`complete failed: ${done.error}`);
}

async function hook(name: string, script: string): Promise<void> {
  const file = path.join(repo, ".git", "hooks", name);
  await writeFile(file, `#!/bin/sh\n${script}\n`);
  chmodSync(file, 0o755);
}

/** The failure is a result saying what was left, never an exception turned into "failed unexpectedly". */
function expectHandled(result: Result): string {
  expect(result.success).toBe(false);
  expect(result.error).not.toContain("unexpectedly");
  return result.error ?? "";
}

describe("the leader's staged changes", () => {
  test("a squash merge never folds the leader's staged, unrelated file into the agent's commit", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    await writeFile(path.join(repo, "notes.txt"), "leader's staged notes\n");
    git(repo, "add", "--", "notes.txt");
    const before = head();
    const refused = await merge(agent.agentId, { strategy: "squash" });
    const error = expectHandled(refused);
    expect(error).toContain("notes.txt");
    expect(error).toContain("Nothing was changed");
    expect(head()).toBe(before);
    expect(git(repo, "diff", "--cached", "--name-only")).toBe("notes.txt");
    expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
  });

  test("a pre-commit hook that exits 1 loses no staged work (refused before the commit is tried)", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    await hook("pre-commit", "echo 'lint failed' >&2; exit 1");
    // A new file staged (today's rollback deleted it from the index and the disk) and a change staged, then edited.
    await writeFile(path.join(repo, "notes.txt"), "staged\n");
    await writeFile(path.join(repo, "app.txt"), "v2 staged\n");
    git(repo, "add", "--", "notes.txt", "app.txt");
    await writeFile(path.join(repo, "app.txt"), "v3 not staged\n");
    expectHandled(await merge(agent.agentId, { strategy: "squash" }));
    expect(git(repo, "show", ":notes.txt")).toBe("staged");
    expect(await read("notes.txt")).toBe("staged\n");
    expect(git(repo, "show", ":app.txt")).toBe("v2 staged");
    expect(await read("app.txt")).toBe("v3 not staged\n");
    expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
  });
});

describe("a commit that fails puts the checkout back at HEAD", () => {
  async function leaderBusyElsewhere() {
    await writeFile(path.join(repo, "app.txt"), "leader's unstaged edit\n");
    await writeFile(path.join(repo, "scratch.txt"), "untracked\n");
  }
  async function expectAsBefore(before: string) {
    expect(head()).toBe(before);
    expect(existsSync(path.join(repo, ".git", "MERGE_HEAD"))).toBe(false);
    expect(git(repo, "diff", "--cached", "--name-only")).toBe("");
    expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
    expect(await read("app.txt")).toBe("leader's unstaged edit\n");
    expect(await read("scratch.txt")).toBe("untracked\n");
    // Nothing else in the checkout: the agent's file gone, no leftover SQUASH_MSG for the leader's next commit.
    expect(
      status()
        .split("\n")
        .map((line) => line.trim())
        .sort(),
    ).toEqual(["?? scratch.txt", "M app.txt"]);
    expect(existsSync(path.join(repo, ".git", "SQUASH_MSG"))).toBe(false);
  }

  test("squash with a pre-commit hook exiting 1: the hook's words, back at HEAD, the branch and worktree kept", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    await hook("pre-commit", "echo 'lint-staged: 3 problems' >&2; exit 1");
    await leaderBusyElsewhere();
    const before = head();
    const error = expectHandled(await merge(agent.agentId, { strategy: "squash" }));
    expect(error).toContain("lint-staged: 3 problems");
    expect(error).toContain(before.slice(0, 12));
    await expectAsBefore(before);
    expect(existsSync(agent.worktree.path)).toBe(true);
    expect(git(repo, "rev-parse", "--verify", `refs/heads/${agent.worktree.branch}`)).not.toBe("");
  });

  test("squash whose signing fails", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    git(repo, "config", "commit.gpgsign", "true");
    git(repo, "config", "gpg.program", "false");
    await leaderBusyElsewhere();
    const before = head();
    const error = expectHandled(await merge(agent.agentId, { strategy: "squash" }));
    expect(error).toContain("gpg");
    await expectAsBefore(before);
  });

  test("merge commit refused by a pre-merge-commit hook", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    await hook("pre-merge-commit", "echo 'no merges today' >&2; exit 1");
    await leaderBusyElsewhere();
    const before = head();
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("no merges today");
    await expectAsBefore(before);
  });
});

describe("what is left when git fails where no hook is to blame", () => {
  test("another merge holding the checkout past the lock's wait: refused, nothing changed", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    ctx.store.withMergeLock = () =>
      Promise.reject(new LockTimeoutError("Timed out after 30000 ms waiting for merge.lock"));
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("Another merge into this checkout is still running");
    expect(error).toContain("Nothing was changed");
  });

  test("a check's git command fails: nothing was changed, said so", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    const edge = ctx.edges.git as GitApi;
    edge.mergeTree = () => Promise.reject(new Error("git merge-tree failed: object file is empty"));
    const before = head();
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("Checking the merge of");
    expect(error).toContain("object file is empty");
    expect(error).toContain("Nothing was changed");
    expect(head()).toBe(before);
    expect(status()).toBe("");
  });

  test("putting back did not complete: the merge in progress is named, with the command that ends it", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    const tip = git(repo, "rev-parse", `refs/heads/${agent.worktree.branch}`);
    const edge = ctx.edges.git as GitApi;
    // A merge killed half-way (its rollback never ran): the checkout holds a merge in progress.
    edge.merge = async () => {
      git(repo, "merge", "--no-ff", "--no-commit", "--quiet", tip);
      throw new Error("git merge failed: killed");
    };
    const before = head();
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("Putting the checkout back did not complete: it holds a merge in progress");
    expect(error).toContain("git merge --abort");
    git(repo, "merge", "--abort");
    expect(head()).toBe(before);
    expect(status()).toBe("");
  });

  test("HEAD moved under a failed merge: said, and nothing is undone blindly", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    const edge = ctx.edges.git as GitApi;
    edge.merge = async () => {
      await commitFile(repo, "other.txt", "the leader's commit\n", "leader: meanwhile");
      throw new Error("git merge failed: cannot lock ref 'HEAD'");
    };
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain(`HEAD is now ${head().slice(0, 12)}`);
    expect(git(repo, "log", "-1", "--format=%s")).toBe("leader: meanwhile");
  });
});

describe("ignored and untracked files on the merge's way", () => {
  test("an ignored .env with real secrets is not overwritten", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), ".env\n");
    const agent = await agentWith({ ".env": "API_KEY=placeholder\n", "feature.txt": "agent\n" });
    await complete(agent);
    await writeFile(path.join(repo, ".env"), "API_KEY=the-real-secret\n");
    const before = head();
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain(".env");
    expect(error).toContain("Nothing was changed");
    expect(await read(".env")).toBe("API_KEY=the-real-secret\n");
    expect(head()).toBe(before);
    expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
  });

  test("an ignored local database and an untracked file at paths the branch adds", async () => {
    const agent = await agentWith({ "data/local.db": "agent's fixture\n", "tools/run.sh": "echo\n" });
    await complete(agent);
    await mkdir(path.join(repo, "data"));
    await writeFile(path.join(repo, "data", "local.db"), "the leader's data\n");
    await mkdir(path.join(repo, "tools"));
    await writeFile(path.join(repo, "tools", "run.sh"), "leader's own script\n");
    const error = expectHandled(await merge(agent.agentId, { strategy: "squash" }));
    expect(error).toContain("data/local.db");
    expect(error).toContain("tools/run.sh");
    expect(await read("data/local.db")).toBe("the leader's data\n");
    expect(await read("tools/run.sh")).toBe("leader's own script\n");
  });

  test("a file that replaces an ignored directory would delete everything under it", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), "cache/\n");
    const agent = await agentWith({ cache: "now a file\n" });
    await complete(agent);
    await mkdir(path.join(repo, "cache", "deep"), { recursive: true });
    await writeFile(path.join(repo, "cache", "deep", "hours-of-work.bin"), "precious\n");
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("cache");
    expect(await read("cache/deep/hours-of-work.bin")).toBe("precious\n");
  });

  test("a directory that replaces an ignored file would delete it", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), "logs\n");
    const agent = await agentWith({ "logs/today.txt": "agent log\n" });
    await complete(agent);
    await writeFile(path.join(repo, "logs"), "the leader's log file\n");
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toContain("logs");
    expect(await read("logs")).toBe("the leader's log file\n");
  });

  test("a path with terminal control characters is named escaped", async () => {
    const hostile = "notes\u001b[2J\u001b]52;c;aGk=\u0007.db";
    const agent = await agentWith({ [hostile]: "agent\n" });
    await complete(agent);
    await writeFile(path.join(repo, hostile), "leader\n");
    const error = expectHandled(await merge(agent.agentId));
    expect(error).not.toContain("\u001b");
    expect(error).toContain(JSON.stringify(hostile));
  });

  test("a long list is cut, with the count of the rest", async () => {
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`gen/f${i}.db`, `${i}\n`]));
    const agent = await agentWith(files);
    await complete(agent);
    await mkdir(path.join(repo, "gen"));
    for (const file of Object.keys(files)) await writeFile(path.join(repo, file), "leader\n");
    const error = expectHandled(await merge(agent.agentId));
    expect(error).toMatch(/and \d+ more/);
    expect(error.length).toBeLessThan(1500);
  });

  test("ignored files beside the merge's paths are no reason to refuse", async () => {
    const agent = await agentWith({ "src/feature.txt": "agent\n" });
    await complete(agent);
    await mkdir(path.join(repo, "src"));
    await writeFile(path.join(repo, "src", "build.db"), "ignored, not in the way\n");
    await mkdir(path.join(repo, "node_modules", "x"), { recursive: true });
    await writeFile(path.join(repo, "node_modules", "x", "index.js"), "\n");
    const merged = await merge(agent.agentId);
    expect(merged.success).toBe(true);
    expect(await read("src/feature.txt")).toBe("agent\n");
    expect(await read("src/build.db")).toBe("ignored, not in the way\n");
  });
});

describe("it merges what it checked", () => {
  test("a commit the running agent makes between the checks and the merge is not merged unseen", async () => {
    const agent = await agentWith({ "feature.txt": "checked\n" });
    const checked = git(repo, "rev-parse", `refs/heads/${agent.worktree.branch}`);
    const edge = ctx.edges.git as GitApi;
    const realMerge = edge.merge.bind(edge);
    edge.merge = async (...args: Parameters<GitApi["merge"]>) => {
      await commitFile(agent.worktree.path, "feature.txt", "unseen\n", "a: slipped in");
      return realMerge(...args);
    };
    const merged = await merge(agent.agentId, { force: true });
    expect(merged.success).toBe(true);
    expect(await read("feature.txt")).toBe("checked\n");
    expect(git(repo, "merge-base", "--is-ancestor", checked, "HEAD")).toBe("");
    const tip = git(repo, "rev-parse", `refs/heads/${agent.worktree.branch}`);
    expect(Bun.spawnSync(["git", "-C", repo, "merge-base", "--is-ancestor", tip, "HEAD"]).exitCode).toBe(1);
    expect(merged.merged).toEqual([{ commit: checked, subject: "a: work" }]);
  });
});

describe("an ended agent's ignored files", () => {
  test("an ignored .env or local database in its worktree keeps the worktree, and the leader is told", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), ".env\n");
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await writeFile(path.join(agent.worktree.path, ".env"), "TOKEN=made-by-the-agent\n");
    await writeFile(path.join(agent.worktree.path, "test.db"), "fixtures it built by hand\n");
    await complete(agent);
    const notice = leaderSession.prompts.map((prompt) => prompt.text).join("\n");
    expect(notice).toContain(`Worktree kept at ${agent.worktree.path}: 2 ignored file(s)`);
    expect(notice).toContain(".env");
    const merged = await merge(agent.agentId);
    expect(merged.success).toBe(true);
    expect(merged.worktreeRemoved).toBe(false);
    expect(merged.warnings?.join()).toContain(".env");
    expect(await readFile(path.join(agent.worktree.path, ".env"), "utf8")).toBe("TOKEN=made-by-the-agent\n");
    expect(existsSync(path.join(agent.worktree.path, "test.db"))).toBe(true);
  });

  test("killed with nothing but an ignored file: kept, and the kill's result says why", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), ".env\n");
    const spawned = await call<Spawned>(
      "spawn-agent",
      { teamName: "alpha", prompt: "w", worktree: true },
      LEADER,
    );
    const dir = spawned.worktree?.path ?? "";
    await writeFile(path.join(dir, ".env"), "TOKEN=x\n");
    const killed = await call<Result>(
      "kill-agent",
      { teamName: "alpha", agentId: spawned.agentId, force: true },
      LEADER,
    );
    expect(killed.warnings?.join()).toContain(".env");
    expect(await readFile(path.join(dir, ".env"), "utf8")).toBe("TOKEN=x\n");
  });

  test("a time limit that ends an agent keeps a worktree holding an ignored directory of data, and the notice says so", async () => {
    await writeFile(path.join(repo, ".git", "info", "exclude"), "downloads/\n");
    const spawned = await call<Spawned>(
      "spawn-agent",
      { teamName: "alpha", prompt: "w", worktree: true, timeoutMinutes: 1 },
      LEADER,
    );
    const dir = spawned.worktree?.path ?? "";
    await mkdir(path.join(dir, "downloads"));
    await writeFile(path.join(dir, "downloads", "dataset.csv"), "an hour of downloading\n");
    ctx.clock.advance(61_000);
    expect(await enforceTimeouts(ctx)).toBe(1);
    expect(await readFile(path.join(dir, "downloads", "dataset.csv"), "utf8")).toBe(
      "an hour of downloading\n",
    );
    const notice = (await leaderInbox(ctx)).find((message) => message.type === "agent_timeout");
    expect(notice?.text).toContain(`Worktree kept at ${dir}: 1 ignored file(s)`);
    expect(notice?.text).toContain("downloads/dataset.csv");
  });

  test("rebuildable folders only (node_modules, dist, __pycache__): removed as before", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    for (const dir of ["node_modules/left-pad", "dist", "pkg/__pycache__", ".opencode/node_modules/x"]) {
      await mkdir(path.join(agent.worktree.path, dir), { recursive: true });
      await writeFile(path.join(agent.worktree.path, dir, "f"), "rebuildable\n");
    }
    await writeFile(path.join(repo, ".git", "info", "exclude"), "__pycache__/\n.opencode/\n");
    await complete(agent);
    const merged = await merge(agent.agentId);
    expect(merged).toMatchObject({ success: true, worktreeRemoved: true });
    expect(existsSync(agent.worktree.path)).toBe(false);
  });
});

describe("nothing from a record or a model reaches git as an option", () => {
  test("a base edited to `--output=<file>` is refused, no file written", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    const target = path.join(repo, "written-by-git");
    await ctx.store.updateAgent("alpha", agent.agentId, (state) =>
      state?.worktree ? { ...state, worktree: { ...state.worktree, base: `--output=${target}` } } : state,
    );
    const diff = await call<Result>("agent-diff", { teamName: "alpha", agentId: agent.agentId }, LEADER);
    expect(diff.success).toBe(false);
    expect(git(repo, "status", "--porcelain", "--ignored")).not.toContain("written-by-git");
  });

  test("a message that looks like an option is the commit's subject", async () => {
    const agent = await agentWith({ "feature.txt": "agent\n" });
    await complete(agent);
    const merged = await merge(agent.agentId, { strategy: "squash", message: "--amend" });
    expect(merged.success).toBe(true);
    expect(git(repo, "log", "-1", "--format=%s")).toBe("--amend");
    expect(git(repo, "rev-list", "--count", "HEAD")).toBe("2");
  });
});

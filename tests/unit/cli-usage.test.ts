import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import path from "node:path";
import { recordEnded, recordSpawned } from "../../src/operations/history/history.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const REPO = path.join(import.meta.dir, "..", "..");
const CLI = path.join(REPO, "src", "cli", "main.ts");
let ctx: TestContext;
let builder: AgentState;

async function cli(args: string[]) {
  const child = Bun.spawn([process.execPath, CLI, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "" },
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { stdout, stderr, code };
}

const inProject = (...args: string[]) => cli([...args, "--dir", ctx.projectRoot]);

/** The command names, read from the CLI's own overview. */
async function commandNames(): Promise<string[]> {
  const { stdout } = await cli(["help"]);
  return [...stdout.matchAll(/^ {2}opencode-teams (\w+)/gm)]
    .map((m) => m[1] ?? "")
    .filter((n) => n !== "help");
}

beforeEach(async () => {
  ctx = await makeTestContext();
  ctx.clock.set(Date.now());
  const call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
  builder = await addAgent(ctx, "alpha", { name: "builder", paneId: "%7" });
  const old = await addAgent(ctx, "alpha", { name: "builder", status: "terminated", paneId: "%3" });
  await recordSpawned(ctx, old);
  await recordEnded(ctx, "alpha", old.agentId, "interrupted");
});
afterEach(() => ctx.cleanup());

describe("CLI usage, help and exit codes", () => {
  test("help lists every command; `help <command>` and `<command> --help` give its usage and examples", async () => {
    const names = await commandNames();
    expect(names).toEqual(expect.arrayContaining(["status", "kill", "resume", "merge", "attach", "approve"]));
    for (const name of names) {
      const viaHelp = await cli(["help", name]);
      const viaFlag = await cli([name, "--help"]);
      expect(viaHelp.code).toBe(0);
      expect(viaFlag.code).toBe(0);
      expect(viaFlag.stdout).toBe(viaHelp.stdout);
      expect(viaHelp.stdout).toStartWith(`usage: opencode-teams ${name}`);
      expect(viaHelp.stdout).toContain(`examples:\n  opencode-teams ${name}`);
    }
    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("opencode-teams status");
  }, 60_000);

  test("--version prints the package version", async () => {
    const version = (JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { version: string })
      .version;
    expect(await cli(["--version"])).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  test("an unknown option, a missing or extra argument, a bad value: exit 2 with the command's usage line", async () => {
    for (const args of [
      ["status", "--frobnicate"],
      ["kill", "alpha"],
      ["history", "alpha", "extra"],
      ["watch", "--interval", "0"],
      ["watch", "--interval", "abc"],
      ["server", "restart"],
      ["init", "--undo", "--frobnicate"],
    ]) {
      const run = await inProject(...args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toContain(`usage: opencode-teams ${args[0]}`);
    }
    expect((await inProject("init", "--json")).stdout).toContain("'init' has no --json output");
    const unknown = await cli(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
  });

  test("with --json, errors are JSON on stdout with the exit code", async () => {
    const usage = await inProject("kill", "alpha", "--json");
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout)).toMatchObject({
      success: false,
      exitCode: 2,
      usage: expect.any(String),
    });
    const missing = await inProject("history", "nope", "--json");
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({
      success: false,
      exitCode: 1,
      error: expect.stringContaining("Teams here: alpha"),
    });
  });

  test("a missing team lists the teams there are and names the command to run next", async () => {
    const run = await inProject("status", "nope");
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("Team 'nope' does not exist. Teams here: alpha.");
    expect(run.stderr).toContain("next: opencode-teams status");
  });

  test("an agent is named by name, id or an id prefix; an unknown one lists the team's agents", async () => {
    for (const who of ["builder", builder.agentId, builder.agentId.slice(0, 6)]) {
      const run = await inProject("inbox", "alpha", who, "--json");
      expect({ who, code: run.code }).toEqual({ who, code: 0 });
      expect((JSON.parse(run.stdout) as { agentId: string }).agentId).toBe(builder.agentId);
    }
    const unknown = await inProject("diff", "alpha", "nobody");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("No agent 'nobody' in team 'alpha'. Its agents: builder, leader.");
  });

  test("status: an idle leader is healthy, an ended agent shows no pane, two runs of one name have their own ids", async () => {
    // The leader's last sign of life is an hour old: it is simply idle.
    ctx.clock.set(Date.now() + 3_600_000);
    const run = await inProject("status", "alpha", "--all", "--json");
    const rows = (
      JSON.parse(run.stdout) as {
        agents: {
          name: string;
          agentId: string;
          role: string;
          health: string;
          paneId: string | null;
          status: string;
        }[];
      }
    ).agents;
    expect(rows.find((row) => row.role === "leader")?.health).toBe("healthy");
    const runs = rows.filter((row) => row.name === "builder");
    expect(runs.map((row) => [row.status, row.paneId])).toEqual(
      expect.arrayContaining([
        ["active", "%7"],
        ["terminated", null],
      ]),
    );
    const table = (await inProject("status", "alpha", "--all")).stdout;
    expect(table).not.toContain("%3");
    for (const row of runs) expect(table).toContain(row.agentId.slice(0, 8));
  });

  test("--json keys are camelCase in every command (history's file keys included)", async () => {
    const history = await inProject("history", "alpha", "--json");
    expect(history.stdout).not.toMatch(/"[a-z]+_[a-z_]+":/);
    expect(JSON.parse(history.stdout)).toMatchObject({ maxEntries: expect.any(Number) });
  });

  test("the README's CLI block lists exactly the CLI's commands", async () => {
    const readme = readFileSync(path.join(REPO, "README.md"), "utf8");
    const block = readme.slice(readme.indexOf("Humans get a CLI"));
    const listed = block.slice(block.indexOf("```sh"), block.indexOf("```\n", block.indexOf("```sh") + 5));
    const inReadme = [...listed.matchAll(/^opencode-teams (\w+)/gm)].map((m) => m[1]);
    expect(inReadme.sort()).toEqual((await commandNames()).sort());
  });
});

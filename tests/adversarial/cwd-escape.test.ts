import { afterEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TeamsOptions } from "../../src/options.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { mockModelTeam } from "../helpers/team.ts";
import { toolCaller } from "../helpers/tools.ts";

// An agent works inside the project: a cwd that leads out of it (or into a repository nested in it, which OpenCode
// takes for another project) is refused unless the user allows it.

const LEADER = "ses_leader";
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let outside: string;

async function setup(options: Partial<TeamsOptions> = {}) {
  ctx = await makeTestContext({ promptRetryDelayMs: 0, ...options });
  call = toolCaller(ctx);
  outside = await mkdtemp(path.join(tmpdir(), "oct-outside-"));
  await mockModelTeam(ctx, LEADER);
}

afterEach(async () => {
  await ctx.cleanup();
  await rm(outside, { recursive: true, force: true });
});

type Spawned = { success: boolean; error?: string; agentId?: string };

const spawn = (cwd: string) =>
  call<Spawned>("spawn-agent", { teamName: "alpha", prompt: "work", headless: true, cwd }, LEADER);

async function gitInit(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const run = Bun.spawnSync(["git", "init", "-q", dir]);
  if (run.exitCode !== 0) throw new Error(`git init failed: ${run.stderr.toString()}`);
}

async function expectRefused(cwd: string, text: string): Promise<void> {
  const result = await spawn(cwd);
  expect(result.success).toBe(false);
  expect(result.error).toContain(text);
  expect(result.error).toContain("allowCwdOutsideProject");
  // Refused before anything was made: no session, no member.
  expect(ctx.server.sessions.size).toBe(0);
  const team = await ctx.store.readTeam("alpha");
  expect(team.kind === "ok" && team.value.members).toHaveLength(1);
}

async function agentCwd(agentId: string | undefined): Promise<string> {
  const read = await ctx.store.readAgent("alpha", agentId ?? "");
  if (read.kind !== "ok") throw new Error("no agent");
  return read.value.cwd;
}

describe("spawn-agent refuses a cwd outside the project", () => {
  test.each(["/", "../../..", "/etc", ".."])("cwd %p", async (cwd) => {
    await setup();
    await expectRefused(cwd, "is outside the project root");
  });

  test("a symlink inside the project that leads out of it", async () => {
    await setup();
    await symlink(outside, path.join(ctx.projectRoot, "escape"));
    await expectRefused("escape", `(really '`);
  });

  test("a directory of a git repository nested in the project", async () => {
    await setup();
    await gitInit(path.join(ctx.projectRoot, "vendor", "lib"));
    await mkdir(path.join(ctx.projectRoot, "vendor", "lib", "src"));
    await expectRefused("vendor/lib", "is inside the git repository");
    await expectRefused(
      path.join(ctx.projectRoot, "vendor", "lib", "src"),
      "OpenCode treats it as a separate project",
    );
  });

  test("a nested worktree or submodule (.git is a file) counts as nested too", async () => {
    await setup();
    await mkdir(path.join(ctx.projectRoot, "sub"));
    await writeFile(path.join(ctx.projectRoot, "sub", ".git"), "gitdir: /somewhere/else\n");
    await expectRefused("sub", "is inside the git repository");
  });
});

describe("what stays allowed", () => {
  test("a directory inside the project, even when the project root is itself a git repository", async () => {
    await setup();
    await gitInit(ctx.projectRoot);
    await mkdir(path.join(ctx.projectRoot, "packages", "api"), { recursive: true });
    const result = await spawn("packages/api");
    expect(result.success).toBe(true);
    expect(await agentCwd(result.agentId)).toBe(path.join(ctx.projectRoot, "packages", "api"));
  });

  test("a symlink that stays inside the project is followed to its real place", async () => {
    await setup();
    await mkdir(path.join(ctx.projectRoot, "real"));
    await symlink(path.join(ctx.projectRoot, "real"), path.join(ctx.projectRoot, "alias"));
    const result = await spawn("alias");
    expect(result.success).toBe(true);
    expect(await agentCwd(result.agentId)).toBe(path.join(ctx.projectRoot, "real"));
  });

  test("with allowCwdOutsideProject the user may send an agent anywhere", async () => {
    await setup({ allowCwdOutsideProject: true });
    const result = await spawn(outside);
    expect(result.success).toBe(true);
    expect(await agentCwd(result.agentId)).toBe(outside);
  });
});

import { expect } from "bun:test";
import { existsSync, readdirSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { spareDir, sparesSettled } from "../../src/operations/worktrees/spare.ts";
import type { AgentWorktree } from "../../src/state/schemas.ts";
import { makeTestContext, type TestContext } from "./context.ts";
import { git, initRepo } from "./git.ts";
import { agentOnDisk } from "./team.ts";
import { toolCaller } from "./tools.ts";

/** Helpers of the spare worktree's tests (specs/worktrees.md, "The spare"): team `alpha` with worktrees by default. */

export const LEADER = "ses_lead";

/** What spawn-agent (and resume-agent) answer, as the worktree tests read it. */
export interface Spawned {
  success: boolean;
  error?: string;
  agentId: string;
  sessionId: string;
  name: string;
  worktree?: AgentWorktree;
  warnings?: string[];
}

export interface SpareTeam {
  ctx: TestContext;
  call: ReturnType<typeof toolCaller>;
  /** The leader's HEAD when the team was made. */
  base: string;
}

/** A repository (app.txt, lib/util.txt) and team `alpha` created with `worktrees: true`: its spare is on its way. */
export async function spareTeam(
  options: Parameters<typeof makeTestContext>[0] = {},
  /** Runs on the repository before the team exists (and so before its first spare is made). */
  prepare?: (repo: string) => Promise<void>,
): Promise<SpareTeam> {
  const ctx = await makeTestContext({ promptRetryDelayMs: 0, ...options });
  await mkdir(path.join(ctx.projectRoot, "lib"));
  const base = await initRepo(ctx.projectRoot, { "app.txt": "v1\n", "lib/util.txt": "u\n" });
  await prepare?.(ctx.projectRoot);
  const call = toolCaller(ctx);
  const created = await call<{ success: boolean; error?: string }>(
    "create-team",
    { teamName: "alpha", worktrees: true },
    LEADER,
  );
  if (!created.success) throw new Error(created.error);
  ctx.local.addSession({ id: LEADER });
  return { ctx, call, base };
}

export const teamDir = (ctx: TestContext, team = "alpha") => path.join(ctx.store.paths.worktreesDir, team);

/** What is in the team's worktree directory, sorted. */
export function entries(ctx: TestContext): string[] {
  return existsSync(teamDir(ctx)) ? readdirSync(teamDir(ctx)).sort() : [];
}

/** The inode of app.txt in `dir`: the same one means the same checkout, moved. */
export const inode = (dir: string) => statSync(path.join(dir, "app.txt")).ino;

export async function spawnOk(
  team: SpareTeam,
  args: Record<string, unknown> = {},
): Promise<Spawned & { worktree: AgentWorktree }> {
  const spawned = await team.call<Spawned>(
    "spawn-agent",
    { teamName: "alpha", prompt: "work", ...args },
    LEADER,
  );
  if (!spawned.success || !spawned.worktree) throw new Error(`spawn failed: ${spawned.error}`);
  return { ...spawned, worktree: spawned.worktree };
}

/** The spare of `commit`, once the background maker is done; throws when there is none. */
export async function readySpare(ctx: TestContext, commit: string): Promise<{ dir: string; ino: number }> {
  await sparesSettled(ctx);
  const dir = spareDir(ctx, "alpha", commit);
  if (!existsSync(dir)) throw new Error(`no spare at ${dir}: ${entries(ctx).join(", ")}`);
  return { dir, ino: inode(dir) };
}

/** The agent's worktree is what `git worktree add -b` makes: its branch at `commit`, clean, its cwd in it. */
export async function expectFreshWorktree(
  ctx: TestContext,
  agent: Spawned & { worktree: AgentWorktree },
  commit: string,
  cwdInRepo = "",
): Promise<void> {
  const dir = path.join(teamDir(ctx), agent.name);
  const branch = `teams/alpha/${agent.name}`;
  expect(agent.worktree).toEqual({ path: dir, branch, base: commit });
  expect(git(dir, "symbolic-ref", "HEAD")).toBe(`refs/heads/${branch}`);
  expect(git(dir, "rev-parse", "HEAD")).toBe(commit);
  expect(git(dir, "rev-parse", "--show-toplevel")).toBe(dir);
  expect(git(dir, "status", "--porcelain", "--untracked-files=all")).toBe("");
  expect((await agentOnDisk(ctx, agent)).cwd).toBe(path.join(dir, cwdInRepo));
  expect(ctx.server.sessions.get(agent.sessionId)?.directory).toBe(path.join(dir, cwdInRepo));
  const listed = git(ctx.projectRoot, "worktree", "list", "--porcelain");
  expect(listed).toContain(`worktree ${dir}\nHEAD ${commit}\nbranch refs/heads/${branch}`);
}

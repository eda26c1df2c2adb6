import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { lutimes, mkdir, readdir, symlink, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { startLiveness } from "../../src/operations/liveness/background.ts";
import { StoragePaths } from "../../src/state/paths.ts";
import { writeTempNow } from "../../src/state/store.ts";
import { removeStrayTemps } from "../../src/state/stray-temps.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const HOUR = 60 * 60 * 1000;
const contexts: TestContext[] = [];

afterEach(async () => {
  for (const ctx of contexts.splice(0)) await ctx.cleanup();
});

async function context(): Promise<TestContext> {
  const ctx = await makeTestContext();
  contexts.push(ctx);
  await toolCaller(ctx)("create-team", { teamName: "alpha" }, "ses_lead");
  return ctx;
}

/** A write's temporary file named as the store names it, as a writer killed before its rename leaves it. */
async function leftTemp(file: string, mtime: number): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = writeTempNow(file, '{"half": ');
  await utimes(temp, mtime / 1000, mtime / 1000);
  return temp;
}

describe("temporary files of interrupted writes", () => {
  test("only this plugin's temporary files older than the cut-off go; worktrees, links and other files stay", async () => {
    const ctx = await context();
    const { paths } = ctx.store;
    const now = ctx.clock.now();
    const agentFile = paths.agentState("alpha", "0b6f1c1e-2f0a-4d39-9a3e-6a1f0e1c2d3b");
    const old = await leftTemp(agentFile, now - 2 * HOUR);
    const oldTeam = await leftTemp(paths.tasks("alpha"), now - 2 * HOUR);
    const fresh = await leftTemp(paths.teamConfig("alpha"), now - 60_000);
    // The user's files in an agent's checkout, even one named like ours, are not state.
    const inWorktree = await leftTemp(
      path.join(paths.worktreesDir, "alpha-w1", "src", "data.json"),
      now - 2 * HOUR,
    );
    // Not our naming.
    const other = path.join(paths.teamDir("alpha"), "notes.tmp");
    await writeFile(other, "x");
    await utimes(other, (now - 2 * HOUR) / 1000, (now - 2 * HOUR) / 1000);
    // A link named like ours is neither removed nor followed.
    const outside = path.join(path.dirname(paths.root), "outside.json.1.deadbeef.tmp");
    await writeFile(outside, "theirs");
    await utimes(outside, (now - 2 * HOUR) / 1000, (now - 2 * HOUR) / 1000);
    const link = path.join(paths.teamDir("alpha"), "linked.json.7.deadbeef.tmp");
    await symlink(outside, link);

    expect(await removeStrayTemps(paths, now - HOUR)).toBe(2);
    expect([old, oldTeam].map(existsSync)).toEqual([false, false]);
    expect([fresh, inWorktree, other, outside, link].map(existsSync)).toEqual([true, true, true, true, true]);
    // A second pass finds nothing more; a missing root is no error.
    expect(await removeStrayTemps(paths, now - HOUR)).toBe(0);
    expect(await removeStrayTemps(new StoragePaths(path.join(paths.root, "nowhere")), now)).toBe(0);
  });

  test("a takeover guard a crashed taker left moved aside goes an hour after the move, whatever its own age", async () => {
    const ctx = await context();
    const { paths } = ctx.store;
    const lock = `${paths.agentState("alpha", "0b6f1c1e-2f0a-4d39-9a3e-6a1f0e1c2d3b")}.lock`;
    await mkdir(path.dirname(lock), { recursive: true });
    // As lock.ts leaves one: the guard (a link to its taker's token) renamed, its mtime from long before the move.
    const guard = `${lock}.takeover.0123456789abcdef.aside`;
    await symlink("4242 host 00ff00ff00ff00ff", guard);
    const twoHoursAgo = (Date.now() - 2 * HOUR) / 1000;
    await lutimes(guard, twoHoursAgo, twoHoursAgo);
    // A link is unlinked, never followed: what it names stays.
    const outside = path.join(path.dirname(paths.root), "outside-target");
    await writeFile(outside, "theirs");
    const linked = `${lock}.takeover.fedcba9876543210.aside`;
    await symlink(outside, linked);
    // An older version's directory guard goes when empty; one holding anything is not ours to empty.
    const emptyDir = `${paths.teamConfig("alpha")}.lock.takeover.00000000000000aa.aside`;
    await mkdir(emptyDir);
    const fullDir = `${paths.teamConfig("alpha")}.lock.takeover.00000000000000bb.aside`;
    await mkdir(fullDir);
    await writeFile(path.join(fullDir, "kept"), "x");
    const inWorktree = path.join(paths.worktreesDir, "alpha-w1", "x.lock.takeover.0123456789abcdef.aside");
    await mkdir(path.dirname(inWorktree), { recursive: true });
    await writeFile(inWorktree, "user's");

    // Moved aside just now: a taker may be between its move and its removal (or putting it back).
    expect(await removeStrayTemps(paths, Date.now() - HOUR)).toBe(0);
    expect(existsSync(emptyDir)).toBe(true);
    // Both links are still there (existsSync would follow them, and the first names no file).
    expect((await readdir(path.dirname(lock))).filter((name) => name.endsWith(".aside")).length).toBe(2);

    // An hour on (the cut-off after the move).
    expect(await removeStrayTemps(paths, Date.now() + 1_000)).toBe(3);
    expect((await readdir(path.dirname(lock))).filter((name) => name.endsWith(".aside"))).toEqual([]);
    expect([emptyDir, fullDir, outside, inWorktree].map(existsSync)).toEqual([false, true, true, true]);
  });

  test("liveness removes them when it starts, beside intact state", async () => {
    const ctx = await context();
    const agent = await addAgent(ctx, "alpha");
    const agentFile = ctx.store.paths.agentState("alpha", agent.agentId);
    const temp = await leftTemp(agentFile, ctx.clock.now() - 2 * HOUR);
    const handle = startLiveness(ctx, { reconnectInitialMs: 5, reconnectMaxMs: 20, streamIdleMs: 60_000 });
    try {
      const deadline = Date.now() + 2_000;
      while (existsSync(temp) && Date.now() < deadline) await Bun.sleep(5);
      expect(existsSync(temp)).toBe(false);
      expect(await readdir(path.dirname(agentFile))).toContain(path.basename(agentFile));
      expect((await ctx.store.readAgent("alpha", agent.agentId)).kind).toBe("ok");
      expect(ctx.logs.some((l) => l.message.includes("leftovers of interrupted writes"))).toBe(true);
    } finally {
      await handle.release();
    }
  });
});

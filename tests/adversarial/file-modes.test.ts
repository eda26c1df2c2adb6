import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmod, lstat, mkdir, readdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { allocateColor } from "../../src/operations/agents/color-pool.ts";
import { recordSpawned } from "../../src/operations/history/history.ts";
import { notifyLeader } from "../../src/operations/messages/notify.ts";
import { buildContext } from "../../src/plugin.ts";
import { withFileLock } from "../../src/state/lock.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// What most users have: without explicit modes, files come out 0644 and directories 0755.
let previousUmask = 0;
beforeAll(() => {
  previousUmask = process.umask(0o022);
});
afterAll(() => {
  process.umask(previousUmask);
});

async function modesUnder(root: string): Promise<Record<string, string>> {
  const modes: Record<string, string> = {};
  const walk = async (dir: string): Promise<void> => {
    modes[path.relative(root, dir) || "."] = ((await stat(dir)).mode & 0o777).toString(8);
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else modes[path.relative(root, full)] = ((await stat(full)).mode & 0o777).toString(8);
    }
  };
  await walk(root);
  return modes;
}

test("every directory of the storage is 0700 and every file 0600, with a umask of 022", async () => {
  const ctx = await makeTestContext();
  try {
    const call = toolCaller(ctx);
    const { leaderAgentId } = await call<{ leaderAgentId: string }>(
      "create-team",
      { teamName: "t" },
      "ses_lead",
    );
    const agent = await addAgent(ctx, "t");
    await call("heartbeat", { teamName: "t", agentId: agent.agentId }, agent.sessionId);
    await call("create-task", { teamName: "t", title: "a task" }, "ses_lead");
    await recordSpawned(ctx, agent);
    await allocateColor(ctx, "t", agent.agentId);
    const team = await ctx.store.readTeam("t");
    if (team.kind !== "ok") throw new Error("no team");
    await notifyLeader(ctx, team.value, { type: "notice", text: "a notice" });
    // A lock is a symbolic link whose target is its owner's token: Linux gives a link no permissions of its own, so
    // the token is reached only through its directory, 0700 like every directory below.
    let lockIsLink = false;
    await withFileLock(ctx.store.paths.tasks("t"), async () => {
      lockIsLink = (await lstat(`${ctx.store.paths.tasks("t")}.lock`)).isSymbolicLink();
    });
    expect(lockIsLink).toBe(true);
    expect(leaderAgentId).toBeTruthy();

    const modes = await modesUnder(ctx.store.paths.root);
    const files = Object.keys(modes).filter((name) => name.endsWith(".json") || name.endsWith(".hb"));
    expect(files.length).toBeGreaterThanOrEqual(7);
    const wrong = Object.entries(modes).filter(([name, mode]) => {
      const isDir = !name.includes(".") || name === ".";
      return mode !== (isDir ? "700" : "600");
    });
    expect(wrong).toEqual([]);
  } finally {
    await ctx.cleanup();
  }
});

test("a storage dir an older version left 0755 is closed to 0700 as soon as a context is built", async () => {
  const ctx = await makeTestContext();
  try {
    await chmod(ctx.store.paths.root, 0o755);
    await mkdir(path.join(ctx.store.paths.root, "teams"), { recursive: true });
    await writeFile(path.join(ctx.store.paths.root, "teams", "old.json"), "{}", { mode: 0o644 });
    const logs: string[] = [];
    buildContext({
      projectRoot: ctx.projectRoot,
      options: ctx.options,
      log: (_level, message) => logs.push(message),
      localServer: ctx.local,
    });
    for (let i = 0; i < 100 && ((await stat(ctx.store.paths.root)).mode & 0o777) !== 0o700; i++)
      await Bun.sleep(10);
    expect(((await stat(ctx.store.paths.root)).mode & 0o777).toString(8)).toBe("700");
    expect(logs.some((message) => message.includes("readable by other users"))).toBe(true);
    // Through the store as well (create-team's path), for a root found open.
    await chmod(ctx.store.paths.root, 0o755);
    await ctx.store.init();
    expect(((await stat(ctx.store.paths.root)).mode & 0o777).toString(8)).toBe("700");
  } finally {
    await ctx.cleanup();
  }
});

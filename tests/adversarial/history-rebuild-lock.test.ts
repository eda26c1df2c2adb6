import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { readHistory } from "../../src/operations/history/history.ts";
import { withFileLock } from "../../src/state/lock.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

/** A context whose team "t" has one agent (w1) and a damaged history file. */
async function damagedHistory(): Promise<{ ctx: TestContext; file: string }> {
  const ctx = await makeTestContext();
  await toolCaller(ctx)("create-team", { teamName: "t" }, "ses_lead");
  await addAgent(ctx, "t", { name: "w1" });
  const file = ctx.store.paths.history("t");
  await writeFile(file, "{ damaged");
  return { ctx, file };
}

test("rebuilding a damaged history waits for the history's lock: nothing is written under another writer", async () => {
  const { ctx, file } = await damagedHistory();
  try {
    let reading: ReturnType<typeof readHistory> | undefined;
    await withFileLock(file, async () => {
      reading = readHistory(ctx, "t");
      await Bun.sleep(300);
      // We hold the lock, as updateHistory would mid-write: the rebuild must not have written meanwhile.
      expect(existsSync(file)).toBe(false);
    });
    const read = await (reading as ReturnType<typeof readHistory>);
    expect(read.history.entries.map((entry) => entry.name)).toEqual(["w1"]);
    expect(read.warnings.join(" ")).toContain("history rebuilt from the agent state files");
    expect(existsSync(file)).toBe(true);
  } finally {
    await ctx.cleanup();
  }
});

test("a rebuild does not overwrite a history another writer put in place after the damaged read", async () => {
  const { ctx, file } = await damagedHistory();
  try {
    let reading: ReturnType<typeof readHistory> | undefined;
    const written = { version: 1, max_entries: 100, entries: [] };
    await withFileLock(file, async () => {
      reading = readHistory(ctx, "t");
      await Bun.sleep(300);
      await writeFile(file, JSON.stringify(written));
    });
    const read = await (reading as ReturnType<typeof readHistory>);
    expect(read.history.entries).toEqual([]);
  } finally {
    await ctx.cleanup();
  }
});

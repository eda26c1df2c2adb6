import { afterEach, beforeEach, expect, test } from "bun:test";
import path from "node:path";
import { painter } from "../../src/cli/format.ts";
import { type BoardTask, collectTasks, renderTaskTree } from "../../src/cli/tasks.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;

async function cli(args: string[]) {
  const child = Bun.spawn([process.execPath, CLI, ...args, "--dir", ctx.projectRoot], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "" },
  });
  const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  return { stdout, code };
}

beforeEach(async () => {
  ctx = await makeTestContext();
  ctx.clock.set(Date.now());
  call = toolCaller(ctx);
  await call("create-team", { teamName: "alpha" }, "ses_lead");
});
afterEach(() => ctx.cleanup());

test("tasks draws the board as a tree of dependencies with status, owner and age; --json gives the same data", async () => {
  await addAgent(ctx, "alpha", { name: "builder", sessionId: "ses_w1" });
  await call(
    "create-task",
    {
      teamName: "alpha",
      tasks: [
        { ref: "db", title: "Write the migration" },
        { ref: "api", title: "Write the API", blockedBy: ["db"] },
        { ref: "docs", title: "Docs \u001b[31mred\u001b[0m\nsecond line" },
        { title: "Review", blockedBy: ["api", "docs"] },
      ],
    },
    "ses_lead",
  );
  await call("claim-task", { teamName: "alpha" }, "ses_w1");
  const { stdout, code } = await cli(["tasks", "alpha"]);
  expect(code).toBe(0);
  const lines = stdout.trimEnd().split("\n");
  expect(lines[0]).toBe("team alpha: 4 task(s) (1 ready, 1 in_progress, 2 blocked)");
  expect(lines[1]).toMatch(/^task-1 in_progress\s+builder\s+\d+s\s+"Write the migration"$/);
  expect(lines[2]).toMatch(/^└ task-2 blocked\s+-\s+\d+s\s+"Write the API"$/);
  expect(lines[3]).toMatch(/^ {2}└ task-4 blocked .*"Review" {2}\(waits for task-2, task-3\)$/);
  expect(lines[4]).toMatch(/^task-3 ready .*"Docs \?\[31mred\?\[0m second line"$/);
  expect(lines[5]).toBe("└ task-4 (see above)");
  // A model's title never reaches the terminal as an escape sequence.
  expect(stdout).not.toContain("\u001b");
  const json = JSON.parse((await cli(["tasks", "alpha", "--json"])).stdout);
  expect(json.teams[0].tasks.map((task: BoardTask) => [task.id, task.ready, task.blocks])).toEqual([
    ["task-1", false, ["task-2"]],
    ["task-2", false, ["task-4"]],
    ["task-3", true, ["task-4"]],
    ["task-4", false, []],
  ]);
  expect(json.teams[0].tasks[0].assigneeName).toBe("builder");
}, 30_000);

test("a chain 1,000 deep is drawn without exhausting the stack, its indent capped", async () => {
  for (let start = 0; start < 1_000; start += 50) {
    const tasks = Array.from({ length: 50 }, (_, i) => ({
      ref: `r${start + i}`,
      title: `step ${start + i + 1}`,
      ...(start + i > 0 ? { blockedBy: [i === 0 ? `task-${start}` : `r${start + i - 1}`] } : {}),
    }));
    await call("create-task", { teamName: "alpha", tasks }, "ses_lead");
  }
  const report = await collectTasks(ctx, "alpha");
  const lines = renderTaskTree(report.teams[0]?.tasks ?? [], painter(false));
  expect(lines).toHaveLength(1_000);
  expect(lines[999]).toStartWith(`${"  ".repeat(15)}└ task-1000`);
});

import { expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { makeTestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

const PROCESSES = 4;
const UPDATES = 200;

test(`${PROCESSES} processes x ${UPDATES} updates to the same team, agent and task files lose nothing`, async () => {
  const ctx = await makeTestContext();
  try {
    const call = toolCaller(ctx);
    const created = await call<{ leaderAgentId: string }>("create-team", { teamName: "busy" }, "ses_lead");
    const agentId = created.leaderAgentId;
    const goFile = path.join(ctx.projectRoot, "go");
    const script = path.join(import.meta.dir, "fixtures", "concurrent-writer.ts");
    const children = Array.from({ length: PROCESSES }, (_, worker) =>
      Bun.spawn(
        [
          process.execPath,
          script,
          ctx.store.paths.root,
          "busy",
          agentId,
          String(worker),
          String(UPDATES),
          goFile,
        ],
        {
          stdout: "inherit",
          stderr: "inherit",
        },
      ),
    );
    // Release them together so they really contend.
    await Bun.sleep(300);
    await writeFile(goFile, "");
    const codes = await Promise.all(children.map((child) => child.exited));
    expect(codes).toEqual(Array(PROCESSES).fill(0));

    const expected = new Set<string>();
    for (let w = 0; w < PROCESSES; w++) for (let i = 0; i < UPDATES; i++) expected.add(`p${w}-${i}`);

    const team = await ctx.store.readTeam("busy");
    if (team.kind !== "ok") throw new Error(`team unreadable: ${team.kind}`);
    expect(new Set(team.value.members.map((m) => m.name).filter((n) => n !== "leader"))).toEqual(expected);

    const agent = await ctx.store.readAgent("busy", agentId);
    if (agent.kind !== "ok") throw new Error(`agent unreadable: ${agent.kind}`);
    expect(agent.value.tags).toHaveLength(PROCESSES * UPDATES);
    expect(new Set(agent.value.tags)).toEqual(expected);

    const board = await ctx.store.readTasks("busy");
    if (board.kind !== "ok") throw new Error(`tasks unreadable: ${board.kind}`);
    expect(new Set(board.value.tasks.map((t) => t.title))).toEqual(expected);
    expect(new Set(board.value.tasks.map((t) => t.id)).size).toBe(PROCESSES * UPDATES);
    expect(board.value.nextId).toBe(PROCESSES * UPDATES + 1);
  } finally {
    await ctx.cleanup();
  }
}, 180_000);

/**
 * An agent whose state file is damaged may still run: the counters that decide about the project server treat it as
 * listings show it (specs/list-agents.md, "Damaged agent files"). The server's recorded count of running sessions
 * counts it under its last known status, and the plugin going away never stops the server under it.
 */
import { afterEach, expect, test } from "bun:test";
import { readFile, writeFile } from "node:fs/promises";
import { releaseProjectServer } from "../../src/operations/server/server-control.ts";
import { recountActiveSessions } from "../../src/operations/server/server-sessions.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { leadTeam } from "../helpers/team.ts";

let ctx: TestContext;
afterEach(() => ctx?.cleanup());

/** A running worker whose state file was torn mid-write (what is left still says `"status": "active"`). */
async function tornRunningWorker() {
  ctx = await makeTestContext();
  await leadTeam(ctx);
  const agent = await addAgent(ctx, "alpha", { name: "builder", status: "active" });
  const file = ctx.store.paths.agentState("alpha", agent.agentId);
  const text = await readFile(file, "utf8");
  await writeFile(file, text.slice(0, text.indexOf('"cwd"')));
  return agent;
}

test("the recorded count of running sessions counts a torn running agent", async () => {
  await tornRunningWorker();
  await recordServerInfo(ctx, 4096, { activeSessions: 0 });
  expect(await recountActiveSessions(ctx)).toBe(1);
});

test("the plugin going away leaves the project server running under an agent whose file is damaged", async () => {
  await tornRunningWorker();
  const stops: string[] = [];
  ctx.edges.serverControl = {
    report: async () => ({ state: "none", detail: "not in this test" }),
    stop: async (reason) => {
      stops.push(reason);
      return { stopped: true, detail: "stopped" };
    },
    startedByThisProcess: async () => true,
    forgetHealthy: () => {},
  };
  await releaseProjectServer(ctx);
  expect(stops).toEqual([]);
});

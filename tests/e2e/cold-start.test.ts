/**
 * The first minute of a fresh project, for real: the fixture `opencode serve` hosts the leader and its plugin; the
 * leader creates a team and spawns 2-3 s later, as a leader does. The project's own `opencode serve` must already be
 * starting when the spawn asks for it (issue 42): shown by the plugin's log lines, in the order the leader's process
 * wrote them (never by how long anything took: the 2 s target is the bench's, figure cold in bench/fig-cold.ts).
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { processCommandLine, terminateProcess } from "../../src/edges/process-info.ts";
import { builtContext } from "../helpers/context.ts";
import { readServerInfo } from "../helpers/server-info.ts";
import { OPENCODE_BIN, useOpencode } from "./harness/index.ts";
import { callTool } from "./harness/session-tools.ts";

const fx = useOpencode({
  gitInit: true,
  env: { OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
  waitForTools: ["spawn-agent"],
});

function serverInfoFile(): string {
  return builtContext(fx.server.projectDir, {}).store.paths.serverInfo(fx.server.projectDir);
}

/** The project server the plugin started: stopped by pid, once checked to be an `opencode serve`. */
afterAll(async () => {
  const info = (() => {
    try {
      return readServerInfo(serverInfoFile());
    } catch {
      return undefined;
    }
  })();
  if (info && info.pid !== fx.server.pid && (await processCommandLine(info.pid))?.includes("serve")) {
    await terminateProcess(info.pid, 2_000);
  }
});

/** The plugin's `project server: ...` lines in the leader's server log (OpenCode keeps plugin logs), in the order written. */
function serverLines(): string[] {
  return readFileSync(fx.server.logPath, "utf8")
    .split("\n")
    .filter((line) => line.includes(`message="project server:`));
}

test("create-team starts the project server; a spawn 2.5 s later finds it booting or up, and no second one boots", async () => {
  const server = fx.server;
  const leader = await server.createSession("leader");
  expect(await callTool(server, leader, "create-team", { teamName: "cold" })).toMatchObject({
    success: true,
  });
  await Bun.sleep(2_500);
  const spawned = (await callTool(server, leader, "spawn-agent", {
    teamName: "cold",
    headless: true,
    prompt: "@@say hi",
  })) as { success: boolean; error?: string; status: string };
  expect(spawned).toMatchObject({ success: true, status: "active" });

  const lines = serverLines();
  console.log(lines.join("\n"));
  const prewarm = lines.findIndex((line) => line.includes("wanted by prewarm (create-team)"));
  const joined = lines.findIndex((line) => line.includes("spawn-agent joins the boot under way"));
  const done = lines.findIndex((line) => line.includes("prewarm done"));
  const spawnAsked = lines.findIndex((line) => line.includes("wanted by spawn-agent"));
  expect(prewarm).toBeGreaterThanOrEqual(0);
  // Either the spawn joined the boot under way, or the boot was done before the spawn asked for the server.
  if (joined >= 0) expect(joined).toBeGreaterThan(prewarm);
  else expect(done).toBeGreaterThan(prewarm);
  if (joined < 0) expect(spawnAsked).toBeGreaterThan(done);
  // One boot: the project server's log has exactly one start.
  const info = readServerInfo(serverInfoFile());
  const starts = readFileSync(info.logPath, "utf8").match(/=== opencode-teams: .* serve on /g) ?? [];
  expect(starts).toHaveLength(1);
}, 150_000);

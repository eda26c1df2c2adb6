/**
 * The project server the plugin starts is never an open door, on the real `opencode serve`: without the user setting
 * any password it gets a random one; strangers (a local process, a web page's cross-origin text/plain POST with a
 * rebound Host) get 401; the password lives only in server.json (0600, 0700 dir) and in the environments of the
 * server and the pane's `opencode attach`, never on a command line or in the log; the plugin inside the server and
 * the pane get in with it.
 *
 * The fixture's own server only provides a hermetic project with the scripted model configured; this test process
 * plays the leader's process and spawns from there.
 */
import { expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import * as realServer from "../helpers/real-server.ts";
import { readServerInfo } from "../helpers/server-info.ts";

const run = realServer.realServerRun("oct-srvauth");

function mode(file: string): string {
  return (statSync(file).mode & 0o777).toString(8);
}

test("a started server: 401 to strangers and to a cross-origin POST, its password only where it must be", async () => {
  const main = await run.start();
  // The fixture's hermetic HOME/XDG dirs; no password anywhere in the environment.
  const env: NodeJS.ProcessEnv = { ...process.env, ...main.env };
  delete env.OPENCODE_SERVER_PASSWORD;
  delete env.OPENCODE_SERVER_USERNAME;
  const { ctx, spawned, server, attachPid } = await realServer.paneWorkerOnRealServer(run, main, env);

  // Strangers: a local process without credentials, and a web page's "simple" request (no preflight) through a
  // rebound DNS name.
  const url = `http://127.0.0.1:${server.info.port}`;
  const query = `?directory=${encodeURIComponent(main.projectDir)}`;
  expect((await fetch(`${url}/session${query}`)).status).toBe(401);
  const crossOrigin = await fetch(`${url}/session${query}`, {
    method: "POST",
    headers: { "Content-Type": "text/plain", Origin: "http://evil.example", Host: "evil.example" },
    body: JSON.stringify({ title: "pwned" }),
  });
  expect(crossOrigin.status).toBe(401);

  // The recorded credentials get in, and nothing was created by the stranger.
  const info = readServerInfo(ctx.store.paths.serverInfo(main.projectDir));
  if (info.auth?.source !== "generated")
    throw new Error(`expected a generated password, got ${info.auth?.source}`);
  const password = info.auth.password;
  expect(password.length).toBeGreaterThanOrEqual(43);
  const auth = realServer.basicAuth({ username: "opencode", password });
  const sessions = (await (await fetch(`${url}/session${query}`, { headers: auth })).json()) as {
    title: string;
  }[];
  expect(sessions.map((s) => s.title)).not.toContain("pwned");

  // Files: 0600 in a 0700 dir; the log never carries the password.
  const dir = ctx.store.paths.serverDir(main.projectDir);
  expect(mode(dir)).toBe("700");
  expect(mode(ctx.store.paths.serverInfo(main.projectDir))).toBe("600");
  expect(mode(ctx.store.paths.serverLog(main.projectDir))).toBe("600");
  expect(readFileSync(ctx.store.paths.serverLog(main.projectDir), "utf8")).not.toContain(password);

  // The worker ran through the protected server with the plugin loaded: its heartbeat succeeded.
  const heartbeat = await realServer.heartbeatResult(url, spawned.sessionId, main.projectDir, auth, 30_000);
  expect(JSON.parse(heartbeat)).toMatchObject({ success: true });

  // The pane's attach has it in its environment, stays connected, and neither command line shows it.
  await realServer.expectPasswordOnlyInEnvironment(server.info.pid, attachPid, password);
  expect(path.basename(server.info.logPath)).toBe("server.log");
}, 150_000);

/**
 * OPENCODE_SERVER_PASSWORD on the real path: the project server the plugin starts is protected, the SDK client and the
 * pane's `opencode attach` get in with the password, and the password never appears on a command line.
 *
 * The fixture's own server (unprotected) only provides a hermetic project with the scripted model configured; this
 * test process plays the plugin's process and spawns from there with the password in its environment, as a user who
 * exported it would.
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import * as realServer from "../helpers/real-server.ts";
import { tmux } from "./harness/index.ts";

const run = realServer.realServerRun("oct-password");
const password = `pw-${randomBytes(8).toString("hex")}`;
const previousPassword = process.env.OPENCODE_SERVER_PASSWORD;

afterAll(() => {
  if (previousPassword === undefined) delete process.env.OPENCODE_SERVER_PASSWORD;
  else process.env.OPENCODE_SERVER_PASSWORD = previousPassword;
});

test("a password-protected project server: spawn gets in, strangers do not, no password in argv", async () => {
  const main = await run.start();
  // Where the plugin reads it from: its process's environment.
  process.env.OPENCODE_SERVER_PASSWORD = password;
  // The fixture's hermetic HOME/XDG dirs for the project server, plus the password.
  const env = { ...process.env, ...main.env, OPENCODE_SERVER_PASSWORD: password };
  const { spawned, server, attachPid } = await realServer.paneWorkerOnRealServer(run, main, env);
  expect(spawned).toMatchObject({ status: "active", promptDelivery: "sdk" });

  // The server refuses a request without credentials and answers one with them.
  const url = `http://127.0.0.1:${server.info.port}`;
  const query = `?directory=${encodeURIComponent(main.projectDir)}`;
  const auth = realServer.basicAuth({ username: "opencode", password });
  expect((await fetch(`${url}/session${query}`)).status).toBe(401);
  expect((await fetch(`${url}/session${query}`, { headers: auth })).status).toBe(200);

  // The worker ran through the protected server with the plugin loaded: its heartbeat succeeded.
  const heartbeat = await realServer.heartbeatResult(url, spawned.sessionId, main.projectDir, auth, 30_000);
  expect(JSON.parse(heartbeat)).toMatchObject({ success: true });

  // The pane's attach got the password through its environment and stays connected; never on a command line.
  await realServer.expectPasswordOnlyInEnvironment(server.info.pid, attachPid, password);
  expect(tmux.listPanes(run.socket).find((p) => p.paneId === spawned.paneId)?.paneDead).toBe(false);
}, 120_000);

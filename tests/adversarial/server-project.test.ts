/**
 * The project server belongs to one project: its password never leaves in a report, another project's server on a
 * recorded pid or port is never signalled nor sent our password, a listener another user binds beside ours on `::1`
 * cannot make ours look foreign, and server.json has one writer at a time. Stand-in servers
 * (tests/helpers/fake-serve.ts): the behaviour under test is ours, not OpenCode's.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { existsSync, mkdirSync } from "node:fs";
import net from "node:net";
import { processRunning, waitForExit } from "../../src/edges/process-info.ts";
import { recountActiveSessions } from "../../src/operations/server/server-sessions.ts";
import { ServerInfoSchema } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";
import { makeTestContext } from "../helpers/context.ts";
import { fakeServeKit } from "../helpers/fake-serve.ts";
import { readServerInfo, writeServerInfo } from "../helpers/server-info.ts";

const kit = fakeServeKit("oct-project-");
afterEach(() => kit.stopAll());
afterAll(() => kit.remove());

test("`server status --json` never prints the password", async () => {
  const { dir, paths } = kit.project("status-json");
  mkdirSync(dir, { recursive: true });
  const server = kit.track(await kit.manager(dir, paths).ensureRunning());
  const password = server.credentials?.password;
  expect(password).toBeDefined();
  const status = kit.cli(["server", "status", "--json", "--dir", dir]);
  expect(JSON.parse(status.out)).toMatchObject({
    state: "running",
    info: { pid: server.info.pid, auth: { source: "generated", username: "opencode" } },
  });
  expect(status.out).not.toContain(password as string);
  expect(status.err).not.toContain(password as string);
});

test("another project's server on the recorded pid and port is never used nor stopped", async () => {
  const a = kit.project("project-a");
  const b = kit.project("project-b");
  mkdirSync(a.dir, { recursive: true });
  mkdirSync(b.dir, { recursive: true });
  const theirs = kit.track(await kit.manager(b.dir, b.paths).ensureRunning());
  // After a reboot, A's record names the pid and port B's server now has.
  await writeServerInfo(a.dir, a.paths, {
    pid: theirs.info.pid,
    port: theirs.info.port,
    auth: { source: "generated", username: "opencode", password: "project-a-secret" },
  });
  const servers = kit.manager(a.dir, a.paths);
  expect(await servers.current()).toBeUndefined();
  expect((await servers.report()).state).not.toBe("running");
  const stop = kit.cli(["server", "stop", "--dir", a.dir]);
  expect(stop.out).toContain("no server of this project is running");
  expect(processRunning(theirs.info.pid)).toBe(true);
  expect(await theirs.api.healthy()).toBe(true);
  const ours = kit.track(await servers.ensureRunning());
  expect(ours.info.pid).not.toBe(theirs.info.pid);
  expect(processRunning(theirs.info.pid)).toBe(true);
});

test("a listener on [::1] at our port does not make our server look foreign", async () => {
  const { dir, paths } = kit.project("ipv6-squat");
  mkdirSync(dir, { recursive: true });
  const servers = kit.manager(dir, paths);
  const ours = kit.track(await servers.ensureRunning());
  const squatter = net.createServer();
  await new Promise<void>((resolve, reject) => {
    squatter.once("error", reject);
    squatter.listen({ host: "::1", port: ours.info.port, ipv6Only: true }, () => resolve());
  });
  try {
    const fresh = kit.manager(dir, paths);
    expect((await fresh.current())?.info.pid).toBe(ours.info.pid);
    expect((await fresh.ensureRunning()).info.pid).toBe(ours.info.pid);
    const stopped = await fresh.stop("test");
    expect(stopped.stopped).toBe(true);
    expect(processRunning(ours.info.pid)).toBe(false);
  } finally {
    await new Promise((resolve) => squatter.close(resolve));
  }
});

test("a recount that read the old record cannot bring back a server.json that stop removed", async () => {
  const ctx = await makeTestContext();
  try {
    const servers = kit.manager(ctx.projectRoot, ctx.store.paths);
    const server = kit.track(await servers.ensureRunning());
    const file = ctx.store.paths.serverInfo(ctx.projectRoot);
    await writeJson(file, ServerInfoSchema, { ...readServerInfo(file), activeSessions: 3 });
    // The recount pauses after reading server.json under its lock, as a slow agent listing would.
    let reached!: () => void;
    const inside = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const listTeamNames = ctx.store.listTeamNames.bind(ctx.store);
    ctx.store.listTeamNames = async () => {
      reached();
      await gate;
      return listTeamNames();
    };
    const recount = recountActiveSessions(ctx);
    await inside;
    const stop = servers.stop("test");
    await waitForExit(server.info.pid, 8_000);
    open();
    expect((await stop).stopped).toBe(true);
    await recount;
    expect(existsSync(file)).toBe(false);
  } finally {
    await ctx.cleanup();
  }
}, 30_000);

/**
 * A server.json we did not write, or lost: the recorded server is used only once its pid, command line and listening
 * socket prove it ours; the password never reaches anything else; a lost record does not start a second server; a
 * slow server is not killed; `opencode-teams server stop` and the plugin's dispose leave no orphan. Stand-in servers
 * (tests/helpers/fake-serve.ts): the behaviour under test is ours, not OpenCode's.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { PluginInput } from "@opencode-ai/plugin";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { processRunning, terminateProcess } from "../../src/edges/process-info.ts";
import { ServerStartError } from "../../src/edges/server-manager.ts";
import { preferredPort } from "../../src/edges/server-ports.ts";
import OpencodeTeamsPlugin from "../../src/index.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { getAgentStatus } from "../../src/operations/views/status.ts";
import { addAgent } from "../helpers/agents.ts";
import { builtContext, makeTestContext } from "../helpers/context.ts";
import { fakeServeKit } from "../helpers/fake-serve.ts";
import { readServerInfo, writeServerInfo } from "../helpers/server-info.ts";

const kit = fakeServeKit("oct-trust-");
const others: number[] = [];

afterEach(async () => {
  await kit.stopAll();
  for (const pid of others.splice(0)) await terminateProcess(pid, 1_000);
});
afterAll(() => kit.remove());

/** An HTTP listener that is not our server; it answers healthy and records every Authorization header it gets. */
function impostor(hostname: string, port = 0) {
  const seen: (string | null)[] = [];
  const server = Bun.serve({
    hostname,
    port,
    fetch(request) {
      seen.push(request.headers.get("authorization"));
      return Response.json({ healthy: true, version: "impostor" });
    },
  });
  return { server, seen, port: server.port as number };
}

/** A live process that is not a server (a reused pid). */
function bystander(): number {
  const child = Bun.spawn(["sleep", "60"], { stdio: ["ignore", "ignore", "ignore"] });
  others.push(child.pid);
  return child.pid;
}

async function waitForListener(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/`).then(
        () => true,
        () => false,
      )
    )
      return;
    await Bun.sleep(50);
  }
  throw new Error(`nothing listens on ${port}`);
}

async function waitForNoListener(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await fetch(`http://127.0.0.1:${port}/`).then(
      () => true,
      () => false,
    );
    if (!open) return;
    await Bun.sleep(50);
  }
  throw new Error(`${port} still listens`);
}

describe("a server.json we did not write", () => {
  test("an impostor on the recorded port is not reused and never receives the password", async () => {
    const { dir, paths } = kit.project("impostor");
    const fake = impostor("127.0.0.1");
    try {
      // The recorded pid lives but is not a server (pid reuse); the user's own password is exported.
      await writeServerInfo(dir, paths, { pid: bystander(), port: fake.port });
      const server = kit.track(
        await kit.manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "user-secret" }).ensureRunning(),
      );
      expect(fake.seen).toEqual([]);
      expect(server.info.port).not.toBe(fake.port);
      expect(await server.api.healthy()).toBe(true);

      // The recorded pid is dead and the impostor holds the project's own preferred port.
      const other = kit.project("impostor-dead");
      const squatter = impostor("127.0.0.1", preferredPort(other.dir));
      try {
        const dead = bystander();
        await terminateProcess(dead, 1_000);
        await writeServerInfo(other.dir, other.paths, { pid: dead, port: squatter.port });
        const fresh = kit.track(await kit.manager(other.dir, other.paths).ensureRunning());
        expect(squatter.seen).toEqual([]);
        expect(fresh.info.port).not.toBe(squatter.port);
      } finally {
        squatter.server.stop(true);
      }
    } finally {
      fake.server.stop(true);
    }
  });

  test("the host is always 127.0.0.1: a hostname in the file never receives the password", async () => {
    const { dir, paths } = kit.project("hostname");
    const servers = kit.manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "user-secret" });
    const ours = kit.track(await servers.ensureRunning());
    // Same port, another loopback address: what a doctored file would send us to.
    const fake = impostor("127.0.0.2", ours.info.port);
    try {
      await writeServerInfo(dir, paths, { ...ours.info, hostname: "127.0.0.2" });
      const again = await kit
        .manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "user-secret" })
        .ensureRunning();
      expect(again.info.pid).toBe(ours.info.pid);
      expect(again.url).toBe(`http://127.0.0.1:${ours.info.port}`);
      expect(fake.seen).toEqual([]);
    } finally {
      fake.server.stop(true);
    }
  });
});

describe("what a process remembers of its verified server", () => {
  test("our server closes its port and an impostor takes it: the remembered check does not send it the password", async () => {
    const { dir, paths } = kit.project("port-taken");
    const servers = kit.manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "user-secret" });
    const ours = kit.track(await servers.ensureRunning());
    expect(await servers.current()).toBeDefined();
    // Same pid, same start time, same port: only the listening socket changed hands.
    process.kill(ours.info.pid, "SIGUSR1");
    await waitForNoListener(ours.info.port);
    const fake = impostor("127.0.0.1", ours.info.port);
    try {
      expect(processRunning(ours.info.pid)).toBe(true);
      expect(await servers.current()).toBeUndefined();
      await servers.ensureRunning().then(kit.track, () => undefined);
      expect(fake.seen).toEqual([]);
    } finally {
      fake.server.stop(true);
    }
  });
});

describe("the password's files", () => {
  test("server.json and server.log 0600 in a 0700 dir, even where an older version left them open", async () => {
    const { dir, paths } = kit.project("modes");
    const serverDir = paths.serverDir(dir);
    mkdirSync(serverDir, { recursive: true, mode: 0o755 });
    chmodSync(serverDir, 0o755);
    writeFileSync(paths.serverLog(dir), "an older log\n", { mode: 0o644 });
    chmodSync(paths.serverLog(dir), 0o644);
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());
    const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);
    expect(mode(serverDir)).toBe("700");
    expect(mode(paths.serverInfo(dir))).toBe("600");
    expect(mode(paths.serverLog(dir))).toBe("600");
    const password = server.credentials?.password ?? "";
    expect(password.length).toBeGreaterThanOrEqual(43);
    expect(readFileSync(paths.serverLog(dir), "utf8")).not.toContain(password);
  });
});

describe("a lost or damaged server.json", () => {
  for (const damage of ["deleted", "damaged"] as const) {
    test(`${damage} while our server runs: it is found, verified and recorded again; no second server`, async () => {
      const { dir, paths } = kit.project(`lost-${damage}`);
      const first = kit.track(await kit.manager(dir, paths).ensureRunning());
      const password = first.credentials?.password;
      if (damage === "deleted") rmSync(paths.serverInfo(dir));
      else writeFileSync(paths.serverInfo(dir), "{ not json");
      const again = kit.track(await kit.manager(dir, paths).ensureRunning());
      expect(again.info.pid).toBe(first.info.pid);
      expect(password).toBeDefined();
      expect(again.credentials?.password).toBe(password);
      expect(await again.api.healthy()).toBe(true);
      expect(readServerInfo(paths.serverInfo(dir))).toMatchObject({
        pid: first.info.pid,
        auth: { password },
      });
      // What happened to the record is in the server log, not only in a file moved aside.
      const log = readFileSync(paths.serverLog(dir), "utf8");
      if (damage === "damaged") expect(log).toContain("looking for our server by its ports");
    });
  }
});

describe("a lost record whose password cannot be recovered", () => {
  test("our orphan, verified by its socket, command line and markers, is stopped; one fresh server runs", async () => {
    const { dir, paths } = kit.project("orphan-nopw");
    mkdirSync(dir, { recursive: true });
    const port = preferredPort(dir);
    // Ours (the markers of this project) but without its password in its environment.
    const orphan = Bun.spawn([kit.fakeBin, "serve", "--hostname", "127.0.0.1", "--port", String(port)], {
      env: {
        PATH: process.env.PATH ?? "",
        OPENCODE_TEAMS_PROJECT_ROOT: dir,
        OPENCODE_TEAMS_DIR: paths.root,
      },
      stdio: ["ignore", "ignore", "ignore"],
    });
    others.push(orphan.pid);
    await waitForListener(port);
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());
    expect(processRunning(orphan.pid)).toBe(false);
    expect(server.info.pid).not.toBe(orphan.pid);
    expect(server.credentials?.password).toBeDefined();
    expect(readFileSync(paths.serverLog(dir), "utf8")).toContain(
      `our server pid ${orphan.pid} lost its record and its password cannot be recovered`,
    );
  });

  test("a server the user started by hand on the project's port (no markers) is never touched", async () => {
    const { dir, paths } = kit.project("users-own");
    mkdirSync(dir, { recursive: true });
    const port = preferredPort(dir);
    const users = Bun.spawn([kit.fakeBin, "serve", "--hostname", "127.0.0.1", "--port", String(port)], {
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "ignore", "ignore"],
    });
    others.push(users.pid);
    await waitForListener(port);
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());
    expect(processRunning(users.pid)).toBe(true);
    expect(server.info.port).not.toBe(port);
  });
});

describe("a slow server is not killed", () => {
  test("alive and listening but not answering: left running, reported unresponsive", async () => {
    const { dir, paths } = kit.project("wedged");
    const wedge = path.join(kit.root, "wedged.flag");
    const env = { FAKE_SERVE_WEDGE: wedge };
    const server = kit.track(await kit.manager(dir, paths, env).ensureRunning());
    writeFileSync(wedge, "");
    try {
      const servers = kit.manager(dir, paths, env, { startTimeoutMs: 2_500 });
      const error = await servers.ensureRunning().catch((e: unknown) => e);
      expect(processRunning(server.info.pid)).toBe(true);
      expect(error).toBeInstanceOf(ServerStartError);
      expect((error as Error).message).toContain("is left running");
      expect(readServerInfo(paths.serverInfo(dir)).pid).toBe(server.info.pid);

      // get-agent-status says so.
      const ctx = await makeTestContext();
      try {
        ctx.edges.serverControl = servers;
        await createTeam(ctx, { teamName: "w" }, "ses_lead");
        const status = await getAgentStatus(
          ctx,
          { teamName: "w", includeServer: true, includeTerminated: false },
          "ses_lead",
        );
        if (!status.success) throw new Error(status.error);
        expect(status.server).toMatchObject({
          pid: server.info.pid,
          state: "unresponsive",
          isRunning: false,
        });
        expect(status.warnings?.join(" ")).toContain("unresponsive");
      } finally {
        await ctx.cleanup();
      }
    } finally {
      rmSync(wedge, { force: true });
    }
    expect(await server.api.healthy(2_000)).toBe(true);
  }, 30_000);
});

describe("nothing orphans a server", () => {
  test("`opencode-teams server status|stop` reports and stops our server by its verified pid", async () => {
    const { dir, paths } = kit.project("cli-stop");
    mkdirSync(dir, { recursive: true });
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());
    const status = kit.cli(["server", "status", "--json", "--dir", dir]);
    expect(status.err).toBe("");
    expect(JSON.parse(status.out)).toMatchObject({ state: "running", info: { pid: server.info.pid } });
    const stop = kit.cli(["server", "stop", "--dir", dir]);
    expect(stop.code).toBe(0);
    expect(stop.out).toContain(`stopped http://127.0.0.1:${server.info.port} (pid ${server.info.pid})`);
    expect(processRunning(server.info.pid)).toBe(false);
    expect(() => readFileSync(paths.serverInfo(dir))).toThrow();
  });

  test("`server stop` never signals a recorded pid that is not our server", async () => {
    const { dir, paths } = kit.project("cli-stop-other");
    mkdirSync(dir, { recursive: true });
    const pid = bystander();
    await writeServerInfo(dir, paths, { pid, port: preferredPort(dir) });
    const stop = kit.cli(["server", "stop", "--dir", dir]);
    expect(stop.out).toContain("no server of this project is running");
    expect(processRunning(pid)).toBe(true);
  });

  test("the plugin's dispose stops the server this process started once no agent runs, not before", async () => {
    const { dir, paths } = kit.project("dispose");
    mkdirSync(dir, { recursive: true });
    const input = {
      client: createOpencodeClient({ baseUrl: "http://127.0.0.1:9" }),
      directory: dir,
      worktree: dir,
      serverUrl: new URL("http://127.0.0.1:9"),
    } as unknown as PluginInput;
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());

    // A live agent keeps it.
    const ctx = builtContext(dir, { background: false });
    await createTeam(ctx, { teamName: "d" }, "ses_lead");
    const worker = await addAgent(ctx, "d", { name: "w1", status: "active" });
    const hooks = await OpencodeTeamsPlugin(input, { background: false, opencodeBin: kit.fakeBin });
    await hooks.dispose?.();
    expect(processRunning(server.info.pid)).toBe(true);

    // Once it has ended, dispose stops the server.
    await ctx.store.writeAgent({ ...worker, status: "terminated" });
    const again = await OpencodeTeamsPlugin(input, { background: false, opencodeBin: kit.fakeBin });
    await again.dispose?.();
    expect(processRunning(server.info.pid)).toBe(false);
  });
});

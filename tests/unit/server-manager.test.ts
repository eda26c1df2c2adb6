/**
 * ServerManager with real processes and a stand-in `opencode serve` (tests/unit/fixtures/fake-opencode-serve.ts):
 * ports, reuse, detaching, credentials, and every way a start can fail. The real binary is covered in tests/e2e.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readlink } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { pidAlive } from "../../src/edges/process.ts";
import { processCommandLine, processRunning, terminateProcess } from "../../src/edges/process-info.ts";
import { ServerStartError } from "../../src/edges/server-manager.ts";
import { candidatePorts, PORT_FIRST, PORT_LAST, preferredPort } from "../../src/edges/server-ports.ts";
import { fakeServeKit } from "../helpers/fake-serve.ts";
import { readServerInfo, writeServerInfo } from "../helpers/server-info.ts";

const kit = fakeServeKit("oct-srv-");
const { root, project, manager, track } = kit;

afterEach(() => kit.stopAll());
afterAll(() => kit.remove());

describe("ports", () => {
  test("the preferred port is stable per path and inside 28000-28999; candidates wrap around", () => {
    const a = preferredPort("/some/project");
    expect(preferredPort("/some/project")).toBe(a);
    expect(a).toBeGreaterThanOrEqual(PORT_FIRST);
    expect(a).toBeLessThanOrEqual(PORT_LAST);
    const ports = candidatePorts("/some/project", 1000);
    expect(ports[0]).toBe(a);
    expect(new Set(ports).size).toBe(1000);
    expect(ports.every((p) => p >= PORT_FIRST && p <= PORT_LAST)).toBe(true);
  });
});

describe("ensureRunning", () => {
  test("cold start: detached, in the project root, ServerInfo written; password in env, not argv", async () => {
    const { dir, paths } = project("cold");
    const record = path.join(root, "cold.json");
    const servers = manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "pw-secret", FAKE_SERVE_RECORD: record });
    const server = track(await servers.ensureRunning());
    expect(server.url).toBe(`http://127.0.0.1:${server.info.port}`);
    expect(server.info.projectPath).toBe(dir);
    expect(server.info.logPath).toBe(paths.serverLog(dir));
    expect(await server.api.healthy()).toBe(true);
    const seen = JSON.parse(readFileSync(record, "utf8")) as { cwd: string; password: string | null };
    expect(seen.cwd).toBe(dir);
    expect(seen.password).toBe("pw-secret");
    const argv = (await processCommandLine(server.info.pid)) ?? [];
    expect(argv).toContain("serve");
    expect(argv.join(" ")).not.toContain("pw-secret");
    // Its own session and process group: it outlives whoever started it.
    const stat = readFileSync(`/proc/${server.info.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    expect(Number(fields[2])).toBe(server.info.pid); // pgrp
    expect(Number(fields[3])).toBe(server.info.pid); // session
    expect(await readlink(`/proc/${server.info.pid}/cwd`)).toBe(dir);
    const info = readServerInfo(paths.serverInfo(dir));
    expect(info.pid).toBe(server.info.pid);
    expect(readFileSync(paths.serverLog(dir), "utf8")).toContain("opencode server listening on");
  });

  test("a live server is reused; a dead one is replaced; current() never starts one", async () => {
    const { dir, paths } = project("reuse");
    const servers = manager(dir, paths);
    expect(await servers.current()).toBeUndefined();
    const first = track(await servers.ensureRunning());
    const again = await manager(dir, paths).ensureRunning();
    expect(again.info.pid).toBe(first.info.pid);
    expect((await servers.current())?.info.pid).toBe(first.info.pid);
    await terminateProcess(first.info.pid);
    expect(await servers.current()).toBeUndefined();
    const second = track(await servers.ensureRunning());
    expect(second.info.pid).not.toBe(first.info.pid);
  });

  test("a healthy answer is trusted for a while by the manager that got it, never across a server that changed", async () => {
    const { dir, paths } = project("trusted");
    const wedge = path.join(root, "trusted-wedge.flag");
    const env = { FAKE_SERVE_WEDGE: wedge };
    const servers = manager(dir, paths, env, { startTimeoutMs: 1_500 });
    const first = track(await servers.ensureRunning());
    expect((await servers.ensureRunning()).info.pid).toBe(first.info.pid);
    writeFileSync(wedge, "");
    try {
      // Busy now: the manager that just heard it healthy does not ask again; a fresh one (another process) does.
      expect((await servers.ensureRunning()).info.pid).toBe(first.info.pid);
      const fresh = await manager(dir, paths, env, { startTimeoutMs: 1_500 })
        .ensureRunning()
        .catch((e: unknown) => e);
      expect(fresh).toBeInstanceOf(ServerStartError);
      // A failed request (spawn's session creation) drops the trust: the same manager then probes again.
      servers.forgetHealthy();
      const probed = await servers.ensureRunning().catch((e: unknown) => e);
      expect(probed).toBeInstanceOf(ServerStartError);
      expect((probed as Error).message).toContain("is left running");
      // Same pid, but its listening socket is gone: the trust went with it.
      process.kill(first.info.pid, "SIGUSR1");
      for (let i = 0; i < 100 && (await servers.current()); i++) await Bun.sleep(20);
      const after = await servers.ensureRunning().catch((e: unknown) => e);
      expect(after).toBeInstanceOf(ServerStartError);
      expect((after as Error).message).toContain("does not listen");
    } finally {
      rmSync(wedge, { force: true });
    }
  }, 30_000);

  test("concurrent ensureRunning from several managers (processes) starts exactly one server", async () => {
    const { dir, paths } = project("race");
    const results = await Promise.all([1, 2, 3, 4].map(() => manager(dir, paths).ensureRunning()));
    for (const r of results) track(r);
    expect(new Set(results.map((r) => r.info.pid)).size).toBe(1);
  });

  test("when the preferred port is taken, the next free one is used", async () => {
    const { dir, paths } = project("taken");
    const preferred = preferredPort(dir);
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(preferred, "127.0.0.1", resolve));
    try {
      const server = track(await manager(dir, paths).ensureRunning());
      expect(server.info.port).not.toBe(preferred);
      expect(candidatePorts(dir)).toContain(server.info.port);
    } finally {
      blocker.close();
    }
  });

  test("a binary that does not exist: Failed to start OpenCode server with the reason", async () => {
    const { dir, paths } = project("nobin");
    const error = await manager(dir, paths, {}, { opencodeBin: path.join(root, "no-such-opencode") })
      .ensureRunning()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServerStartError);
    expect((error as Error).message).toMatch(
      /^Failed to start OpenCode server: cannot run .*no-such-opencode/,
    );
    expect(existsSync(paths.serverInfo(dir))).toBe(false);
  });

  test("a server that exits at once: the exit code and the last lines of its log", async () => {
    const { dir, paths } = project("exits");
    const error = await manager(dir, paths, { FAKE_SERVE_MODE: "exit" })
      .ensureRunning()
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^Failed to start OpenCode server: .* exited with code 1/);
    expect((error as Error).message).toContain("fake configuration problem on line 3");
    expect((error as Error).message).toContain(paths.serverLog(dir));
  });

  test("a server that never answers: timeout, and the process we started is stopped", async () => {
    const { dir, paths } = project("hangs");
    const record = path.join(root, "hang.json");
    const error = await manager(
      dir,
      paths,
      { FAKE_SERVE_MODE: "hang", FAKE_SERVE_RECORD: record },
      { startTimeoutMs: 1_200 },
    )
      .ensureRunning()
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/did not answer .*\/global\/health within 1200 ms/);
    const { pid } = JSON.parse(readFileSync(record, "utf8")) as { pid: number };
    expect(processRunning(pid)).toBe(false);
  });

  test("a slow start is waited for", async () => {
    const { dir, paths } = project("slow");
    const server = track(await manager(dir, paths, { FAKE_SERVE_MODE: "slow" }).ensureRunning());
    expect(await server.api.healthy()).toBe(true);
  });

  test("a live server that refuses our credentials is reported, not killed", async () => {
    const { dir, paths } = project("auth");
    const server = track(await manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "right" }).ensureRunning());
    const error = await manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "wrong" })
      .ensureRunning()
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^Failed to start OpenCode server: .*refuses our credentials/);
    expect(pidAlive(server.info.pid)).toBe(true);
  });

  test("a recorded pid that is alive but not a server is left alone and a new server started", async () => {
    const { dir, paths } = project("reused-pid");
    await writeServerInfo(dir, paths, { pid: process.pid, port: preferredPort(dir), activeSessions: 3 });
    const server = track(await manager(dir, paths).ensureRunning());
    expect(server.info.pid).not.toBe(process.pid);
    expect(server.info.activeSessions).toBe(0);
  });

  test("a server on the user's password is refused, not killed, where that password is not exported", async () => {
    const { dir, paths } = project("user-pw");
    const server = track(await manager(dir, paths, { OPENCODE_SERVER_PASSWORD: "mine" }).ensureRunning());
    expect(readServerInfo(paths.serverInfo(dir)).auth).toEqual({
      source: "environment",
      username: "opencode",
    });
    const error = await manager(dir, paths)
      .ensureRunning()
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/refuses our credentials/);
    expect(pidAlive(server.info.pid)).toBe(true);
  });

  test("inside our server, its generated password is not taken for the user's", async () => {
    const { dir, paths } = project("nested-start");
    const env = { OPENCODE_SERVER_PASSWORD: "inherited", OPENCODE_TEAMS_SERVER_AUTH: "generated" };
    const server = track(await manager(dir, paths, env).ensureRunning());
    expect(server.info.auth?.source).toBe("generated");
    expect(server.credentials?.password).not.toBe("inherited");
  });
});

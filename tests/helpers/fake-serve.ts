/**
 * ServerManager against a stand-in `opencode serve` (tests/unit/fixtures/fake-opencode-serve.ts) run through a script
 * named like the real binary: real processes, ports and /proc, none of OpenCode's start-up cost.
 */
import { chmodSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { terminateProcess } from "../../src/edges/process-info.ts";
import { ServerManager, type ServerManagerConfig } from "../../src/edges/server-manager.ts";
import { StoragePaths } from "../../src/state/paths.ts";

const FIXTURE = path.join(import.meta.dir, "..", "unit", "fixtures", "fake-opencode-serve.ts");
const CLI = path.join(import.meta.dir, "..", "..", "src", "cli", "main.ts");

export interface FakeServeKit {
  root: string;
  fakeBin: string;
  /** A project directory (not created) and its default storage paths. */
  project(name: string): { dir: string; paths: StoragePaths };
  manager(
    dir: string,
    paths: StoragePaths,
    env?: Record<string, string>,
    extra?: Partial<ServerManagerConfig>,
  ): ServerManager;
  /** Runs the `opencode-teams` CLI from the checkout, with only PATH and this kit's root as HOME. */
  cli(args: string[]): { code: number; out: string; err: string };
  /** Remember a pid to stop in stopAll (only pids the test started). */
  track<T extends { info: { pid: number } }>(server: T): T;
  stopAll(): Promise<void>;
  remove(): void;
}

export function fakeServeKit(prefix: string): FakeServeKit {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), prefix)));
  const fakeBin = path.join(root, "fake opencode");
  writeFileSync(fakeBin, `#!/bin/sh\nexec '${process.execPath}' '${FIXTURE}' "$@"\n`);
  chmodSync(fakeBin, 0o755);
  const started = new Set<number>();
  return {
    root,
    fakeBin,
    project(name) {
      const dir = path.join(root, name);
      return { dir, paths: new StoragePaths(path.join(dir, ".opencode", "opencode-teams")) };
    },
    manager(dir, paths, env = {}, extra = {}) {
      return new ServerManager({
        projectRoot: dir,
        paths,
        startTimeoutMs: 5_000,
        opencodeBin: fakeBin,
        env: { PATH: process.env.PATH ?? "", ...env },
        ...extra,
      });
    },
    cli(args) {
      const run = Bun.spawnSync([process.execPath, CLI, ...args], {
        stdout: "pipe",
        stderr: "pipe",
        env: { PATH: process.env.PATH ?? "", HOME: root },
      });
      return { code: run.exitCode, out: run.stdout.toString(), err: run.stderr.toString() };
    },
    track(server) {
      started.add(server.info.pid);
      return server;
    },
    async stopAll() {
      for (const pid of started) await terminateProcess(pid, 1_000);
      started.clear();
    },
    remove() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

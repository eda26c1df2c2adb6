import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ManualClock } from "../../src/clock.ts";
import type { LogLevel, TeamsContext } from "../../src/operations/context.ts";
import { parseOptions, type TeamsOptions } from "../../src/options.ts";
import { resolveStorageRoot, StoragePaths } from "../../src/state/paths.ts";
import { TeamStore } from "../../src/state/team-store.ts";

export interface TestContext extends TeamsContext {
  clock: ManualClock;
  logs: { level: LogLevel; message: string }[];
  cleanup(): Promise<void>;
}

/** A throwaway project with its own storage dir and a clock the test moves by hand. */
export async function makeTestContext(options: Partial<TeamsOptions> = {}): Promise<TestContext> {
  const projectRoot = await mkdtemp(path.join(tmpdir(), "oct-unit-"));
  const logs: TestContext["logs"] = [];
  const store = new TeamStore(new StoragePaths(resolveStorageRoot(projectRoot, {})));
  await store.init();
  return {
    projectRoot,
    store,
    clock: new ManualClock(),
    options: parseOptions({ background: false, ...options }),
    log: (level, message) => logs.push({ level, message }),
    logs,
    cleanup: () => rm(projectRoot, { recursive: true, force: true }),
  };
}

export function parseOutput<T = Record<string, unknown>>(result: unknown): T {
  if (typeof result === "string") return JSON.parse(result) as T;
  return JSON.parse((result as { output: string }).output) as T;
}

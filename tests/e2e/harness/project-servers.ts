/**
 * The project servers the plugin started for a test's project (spawn-agent, or the prewarm after create-team): they
 * run detached and would outlive the test. Stopped by the pid each server.json records, and only while that pid is
 * still an `opencode serve` carrying this project's root in its environment (a reused pid is someone else's).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { PROJECT_ROOT_ENV } from "../../../src/state/paths.ts";

function recordedPids(storageDir: string): number[] {
  const servers = path.join(storageDir, "servers");
  if (!existsSync(servers)) return [];
  return readdirSync(servers).flatMap((dir) => {
    try {
      const info = JSON.parse(readFileSync(path.join(servers, dir, "server.json"), "utf8")) as {
        pid?: unknown;
      };
      return typeof info.pid === "number" ? [info.pid] : [];
    } catch {
      return [];
    }
  });
}

function isProjectServer(pid: number, projectDir: string): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    return argv.includes("serve") && env.includes(`${PROJECT_ROOT_ENV}=${projectDir}`);
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stop every project server recorded under `storageDir` that is still this project's; SIGKILL after `graceMs`. */
export async function stopProjectServers(
  projectDir: string,
  storageDir: string,
  graceMs = 3_000,
): Promise<void> {
  const ours = recordedPids(storageDir).filter((pid) => isProjectServer(pid, projectDir));
  for (const pid of ours) process.kill(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (ours.some(alive) && Date.now() < deadline) await Bun.sleep(50);
  for (const pid of ours.filter(alive)) if (isProjectServer(pid, projectDir)) process.kill(pid, "SIGKILL");
}

import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export interface MachineInfo {
  date: string;
  cores: number;
  cpu: string;
  memoryGiB: number;
  platform: string;
  node: string;
  bun: string;
  opencode: string;
}

function packageVersion(repoRoot: string, name: string): string {
  try {
    const pkg = JSON.parse(
      readFileSync(path.join(repoRoot, "node_modules", name, "package.json"), "utf8"),
    ) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "not installed";
  }
}

function nodeVersion(): string {
  try {
    const out = Bun.spawnSync(["node", "--version"]).stdout.toString().trim();
    return out || "not found";
  } catch {
    return "not found";
  }
}

export function machineInfo(repoRoot: string): MachineInfo {
  return {
    date: new Date().toISOString(),
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model ?? "unknown",
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    platform: `${os.platform()} ${os.release()}`,
    node: nodeVersion(),
    bun: Bun.version,
    opencode: packageVersion(repoRoot, "opencode-ai"),
  };
}

import { existsSync } from "node:fs";
import path from "node:path";

/**
 * Which `opencode` to run: `OPENCODE_TEAMS_OPENCODE_BIN` when set, else the project's own node_modules copy, else
 * whatever `opencode` is on PATH.
 */
export function resolveOpencodeBinary(projectRoot: string, env: NodeJS.ProcessEnv = process.env): string {
  const override = env.OPENCODE_TEAMS_OPENCODE_BIN;
  if (override && override.trim() !== "") return override;
  const local = path.join(projectRoot, "node_modules", ".bin", "opencode");
  if (existsSync(local)) return local;
  return Bun.which("opencode", { PATH: env.PATH ?? "" }) ?? "opencode";
}

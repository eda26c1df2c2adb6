#!/usr/bin/env node
// The CLI is TypeScript written for Bun (the runtime OpenCode plugins run in). npm links bins to run under node, and a
// user of this plugin may have no Bun of their own, but they do have OpenCode: its binary is Bun, and runs as plain
// Bun when BUN_BE_BUN=1. So: the first `bun` on PATH, else that OpenCode binary.
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const main = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "cli", "main.ts");

function executable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** An executable named `name` in one of the PATH directories. */
function onPath(name) {
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter(Boolean);
  return dirs.map((dir) => path.join(dir, name)).find(executable);
}

/** The same opencode the plugin itself would run: the override, the project's own copy, then PATH. */
function opencodeBinary() {
  const override = process.env.OPENCODE_TEAMS_OPENCODE_BIN?.trim();
  if (override) return override;
  const local = path.join(process.cwd(), "node_modules", ".bin", "opencode");
  return executable(local) ? local : onPath("opencode");
}

function runtime() {
  const bun = onPath("bun");
  if (bun) return { command: bun, env: process.env };
  const opencode = opencodeBinary();
  return opencode ? { command: opencode, env: { ...process.env, BUN_BE_BUN: "1" } } : undefined;
}

const chosen = runtime();
if (!chosen) {
  process.stderr.write(
    "opencode-teams: needs Bun or OpenCode to run; install OpenCode (npm install -g opencode-ai) or Bun, " +
      "or set OPENCODE_TEAMS_OPENCODE_BIN to the opencode binary\n",
  );
  process.exit(1);
}
const child = spawn(chosen.command, [main, ...process.argv.slice(2)], { stdio: "inherit", env: chosen.env });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
child.on("error", (error) => {
  process.stderr.write(`opencode-teams: cannot run ${chosen.command}: ${error.message}\n`);
  process.exit(1);
});

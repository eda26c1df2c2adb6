import { lstat, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { resolveOpencodeBinary } from "../edges/opencode-binary.ts";
import type { TeamsContext } from "../operations/context.ts";
import { walkStorage } from "../state/storage-walk.ts";
import type { Check } from "./doctor-check.ts";
import { checkPluginConfigured, checkPluginLoads } from "./doctor-plugin.ts";
import type { Painter } from "./format.ts";
import { terminalLine } from "./terminal-text.ts";

async function runVersion(argv: string[]): Promise<string | undefined> {
  try {
    // The environment as main.ts left it (Bun.spawn's default is the one the process started with).
    const child = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe", stdin: "ignore", env: process.env });
    const timer = setTimeout(() => child.kill(), 10_000);
    const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    clearTimeout(timer);
    return code === 0 ? out.trim().split("\n")[0] : undefined;
  } catch {
    return undefined;
  }
}

async function checkTmux(): Promise<Check> {
  const version = await runVersion(["tmux", "-V"]);
  return version
    ? { name: "tmux", level: "ok", detail: version }
    : {
        name: "tmux",
        level: "fail",
        detail: "tmux is not installed or not on PATH",
        fix: "install tmux (Debian/Ubuntu: apt-get install tmux; macOS: brew install tmux); headless agents work without it",
      };
}

async function checkOpencode(projectRoot: string): Promise<Check> {
  const binary = resolveOpencodeBinary(projectRoot);
  const version = await runVersion([binary, "--version"]);
  return version
    ? { name: "opencode", level: "ok", detail: `${binary} ${version}` }
    : {
        name: "opencode",
        level: "fail",
        detail: `cannot run '${binary} --version'`,
        fix: "install OpenCode (npm install -g opencode-ai) or set OPENCODE_TEAMS_OPENCODE_BIN to its path",
      };
}

async function checkStorage(ctx: TeamsContext): Promise<Check[]> {
  const root = ctx.store.paths.root;
  const checks: Check[] = [];
  try {
    await ctx.store.init();
    const probe = path.join(root, `.doctor-${process.pid}`);
    await writeFile(probe, "");
    await rm(probe);
    checks.push({ name: "storage", level: "ok", detail: `${root} is writable` });
  } catch (error) {
    checks.push({
      name: "storage",
      level: "fail",
      detail: `${root} is not writable: ${error instanceof Error ? error.message : String(error)}`,
      fix: "fix the directory's permissions, or point OPENCODE_TEAMS_DIR at a writable directory",
    });
    return checks;
  }
  const damaged: string[] = [];
  const staleLocks: string[] = [];
  // Not into the worktrees (walkStorage): their `bun.lock` or `Cargo.lock` is the project's own file, not a lock of ours.
  await walkStorage(ctx.store.paths, async (full, entry) => {
    if (entry.name.includes(".corrupt-")) damaged.push(path.relative(root, full));
    // Locks (links, or files), and lock directories an older version left behind: their own mtime, never a target.
    else if (entry.name.endsWith(".lock")) {
      const info = await lstat(full).catch(() => undefined);
      if (info && ctx.clock.now() - info.mtimeMs > 10_000) staleLocks.push(path.relative(root, full));
    } else return true;
    return false;
  });
  checks.push(
    damaged.length === 0
      ? { name: "state files", level: "ok", detail: "no damaged files" }
      : {
          name: "state files",
          level: "warn",
          detail: `${damaged.length} damaged file(s) were moved aside: ${damaged.slice(0, 3).join(", ")}${damaged.length > 3 ? ", …" : ""}`,
          fix: "nothing is needed; delete the .corrupt-* files once you no longer want to inspect them",
        },
  );
  if (staleLocks.length > 0) {
    checks.push({
      name: "locks",
      level: "warn",
      detail: `${staleLocks.length} lock(s) older than 10 s: ${staleLocks.slice(0, 3).join(", ")}`,
      fix: "a crashed process left them; the next writer takes them over automatically",
    });
  }
  return checks;
}

async function checkServer(ctx: TeamsContext): Promise<Check> {
  const report = await ctx.edges.serverControl?.report();
  if (!report)
    return { name: "server", level: "warn", detail: "the project server cannot be checked from here" };
  switch (report.state) {
    case "running":
    case "none":
      return { name: "server", level: "ok", detail: report.detail };
    case "stopped":
      return {
        name: "server",
        level: "warn",
        detail: report.detail,
        fix: "the next spawn-agent starts a new one; agents of the old server show as inactive",
      };
    default:
      return {
        name: "server",
        level: "fail",
        detail: report.detail,
        fix: `see ${report.info?.logPath ?? "the server log"}; \`opencode-teams server stop\` stops it, the next spawn-agent starts a new one`,
      };
  }
}

export interface DoctorReport {
  ok: boolean;
  projectRoot: string;
  checks: Check[];
}

export async function runDoctor(ctx: TeamsContext): Promise<DoctorReport> {
  const checks = [
    await checkTmux(),
    await checkOpencode(ctx.projectRoot),
    ...(await checkStorage(ctx)),
    await checkServer(ctx),
    checkPluginConfigured(ctx.projectRoot),
    await checkPluginLoads(ctx.projectRoot),
  ];
  return { ok: checks.every((check) => check.level !== "fail"), projectRoot: ctx.projectRoot, checks };
}

const MARK = { ok: "✓", warn: "!", fail: "✗" } as const;
const STYLE = { ok: "green", warn: "yellow", fail: "red" } as const;

/** Details name files in the storage dir and the server's state, which agents can write: shown escaped. */
export function renderDoctor(report: DoctorReport, paint: Painter): string {
  return [
    `project: ${terminalLine(report.projectRoot)}`,
    ...report.checks.flatMap((check) => [
      `${paint(MARK[check.level], STYLE[check.level])} ${check.name}: ${terminalLine(check.detail)}`,
      ...(check.fix ? [`    fix: ${terminalLine(check.fix)}`] : []),
    ]),
  ].join("\n");
}

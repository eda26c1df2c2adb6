// Doctor checks for the plugin itself: is it in an OpenCode config this project reads, and does the copy OpenCode
// loads import and register its tools? OpenCode drops a plugin that fails to import without a word, so this is where
// a user learns about it.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { PluginInput } from "@opencode-ai/plugin";
import { createOpencodeClient } from "@opencode-ai/sdk";
import type { Check } from "./doctor-check.ts";
import { missingCopy } from "./doctor-install.ts";
import { configFiles, isPathSpec, PACKAGE_NAME, parseConfig, xdgDir } from "./plugin-config.ts";
import { PLUGIN_FILE } from "./plugin-file.ts";
import { installSource } from "./plugin-source.ts";

/** Tools whose absence means the plugin did not come up whole. */
const CORE_TOOLS = ["create-team", "spawn-agent", "heartbeat"];

interface Configured {
  file: string;
  /** The config entry's spec, or the project plugin file's path for that file. */
  spec: string;
  pluginFile?: true;
}

/** The project plugin file init writes, else the first entry for this package in the project's configs, else the user's. */
function findConfigured(projectRoot: string, env: NodeJS.ProcessEnv): Configured | undefined {
  const pluginFile = path.join(projectRoot, PLUGIN_FILE);
  if (existsSync(pluginFile)) return { file: pluginFile, spec: PLUGIN_FILE, pluginFile: true };
  for (const scope of ["project", "global"] as const) {
    for (const file of configFiles(scope, projectRoot, env)) {
      if (!existsSync(file)) continue;
      const { plugins, ours } = parseConfig(readFileSync(file, "utf8"), file);
      const entry = ours[0] === undefined ? undefined : plugins[ours[0]];
      const spec: unknown = Array.isArray(entry) ? entry[0] : entry;
      if (typeof spec === "string") return { file, spec };
    }
  }
  return undefined;
}

interface LoadedCopy {
  /** The package directory. */
  dir: string;
  /** For an npm spec: OpenCode's install dir for it, which it re-creates when deleted. */
  installDir?: string;
}

/**
 * The copy OpenCode loads for a spec: a path spec's package, or for an npm spec the package OpenCode 1.x installs
 * under `<cache>/opencode/packages/<spec>` (a bare name is installed as `name@latest`).
 */
function loadedCopy(spec: string, configDir: string, env: NodeJS.ProcessEnv): LoadedCopy {
  if (isPathSpec(spec)) {
    let dir = spec.startsWith("file://") ? fileURLToPath(spec) : path.resolve(configDir, spec);
    while (!existsSync(path.join(dir, "package.json")) && path.dirname(dir) !== dir) dir = path.dirname(dir);
    return { dir };
  }
  const cache = xdgDir(env, "XDG_CACHE_HOME", ".cache");
  const installDir = path.join(
    cache,
    "opencode",
    "packages",
    spec.includes("@", 1) ? spec : `${spec}@latest`,
  );
  return { dir: path.join(installDir, "node_modules", PACKAGE_NAME), installDir };
}

function repair(copy: LoadedCopy): string {
  return copy.installDir
    ? `delete ${copy.installDir} so OpenCode installs it again, then restart opencode`
    : `fix ${copy.dir} (\`bun ${entryOf(copy.dir)}\` shows the import error), then restart opencode`;
}

export function checkPluginConfigured(projectRoot: string, env = process.env): Check {
  try {
    const found = findConfigured(projectRoot, env);
    if (found?.pluginFile)
      return {
        name: "plugin config",
        level: "ok",
        detail: `${found.file} (loads the project's installed copy)`,
      };
    if (found) return { name: "plugin config", level: "ok", detail: `${found.spec} in ${found.file}` };
    return {
      name: "plugin config",
      level: "fail",
      detail: "no OpenCode config this project reads lists opencode-teams",
      fix: "run `npx opencode-teams init` here (or `init --global` for every project)",
    };
  } catch (error) {
    return {
      name: "plugin config",
      level: "fail",
      detail: error instanceof Error ? error.message : String(error),
      fix: "repair that file (OpenCode cannot read it either), then run doctor again",
    };
  }
}

/** Import a plugin module the way OpenCode 1.x does and call each export; returns the tool names registered. */
async function loadTools(entry: string): Promise<string[]> {
  const mod: Record<string, unknown> = await import(pathToFileURL(entry).href);
  const directory = mkdtempSync(path.join(os.tmpdir(), "oct-doctor-"));
  const input = {
    client: createOpencodeClient({ baseUrl: "http://127.0.0.1:9" }),
    project: { id: "global", worktree: directory, time: { created: Date.now() } },
    directory,
    worktree: directory,
    serverUrl: new URL("http://127.0.0.1:9"),
    $: Bun.$,
  } as unknown as PluginInput;
  const tools = new Set<string>();
  try {
    // OpenCode 1.x calls every distinct exported value as a plugin; a value that is not a function fails the load.
    for (const value of new Set(Object.values(mod))) {
      if (typeof value !== "function")
        throw new Error(`it exports a ${typeof value}, which OpenCode 1.x refuses`);
      const hooks = await value(input, { background: false });
      for (const name of Object.keys(hooks?.tool ?? {})) tools.add(name);
      await hooks?.dispose?.();
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
  return [...tools];
}

/** The module a package directory exposes as `.` (exports, else main). */
function entryOf(dir: string): string {
  const pkg: { main?: unknown; exports?: unknown } = JSON.parse(
    readFileSync(path.join(dir, "package.json"), "utf8"),
  );
  const dot =
    typeof pkg.exports === "object" && pkg.exports !== null
      ? (pkg.exports as Record<string, unknown>)["."]
      : pkg.exports;
  const target = typeof dot === "string" ? dot : typeof pkg.main === "string" ? pkg.main : "index.js";
  return path.join(dir, target);
}

export async function checkPluginLoads(projectRoot: string, env = process.env): Promise<Check> {
  const name = "plugin loads";
  let found: Configured | undefined;
  try {
    found = findConfigured(projectRoot, env);
  } catch {
    return { name, level: "warn", detail: "skipped: the config cannot be read (see plugin config)" };
  }
  if (!found) return { name, level: "warn", detail: "skipped: the plugin is not configured" };
  if (found.pluginFile) return checkPluginFileLoads(found.file, projectRoot);
  const copy = loadedCopy(found.spec, path.dirname(found.file), env);
  if (!existsSync(path.join(copy.dir, "package.json"))) {
    return copy.installDir
      ? missingCopy(found.spec, found.file, copy.installDir, projectRoot, env)
      : {
          name,
          level: "fail",
          detail: `${found.spec} in ${found.file}: no package at ${copy.dir}`,
          fix: "fix the path, or run `npx opencode-teams init` in a project that installed the package",
        };
  }
  return checkCopyLoads(copy, entryOf(copy.dir));
}

/** Where a bare import of this package from `start` resolves: the nearest `node_modules/<name>` at or above it. */
function installedPackageAbove(start: string): string | undefined {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", PACKAGE_NAME);
    if (existsSync(path.join(candidate, "package.json"))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** The project plugin file: its import must find the project's installed package, and the module must load. */
async function checkPluginFileLoads(file: string, projectRoot: string): Promise<Check> {
  const dir = installedPackageAbove(path.dirname(file));
  if (!dir) {
    const source = installSource(projectRoot);
    return {
      name: "plugin loads",
      level: "fail",
      detail: `${file} imports ${PACKAGE_NAME}, but this project has no node_modules/${PACKAGE_NAME}, so OpenCode drops it without a word`,
      fix:
        source.kind === "absent"
          ? "install it (`npm install --save-dev <path to>/opencode-teams-<version>.tgz`), then restart opencode"
          : `run \`npm install\` here (package.json installs it from ${source.spec}), then restart opencode`,
    };
  }
  return checkCopyLoads({ dir }, file);
}

async function checkCopyLoads(copy: LoadedCopy, entry: string): Promise<Check> {
  const name = "plugin loads";
  const dir = copy.dir;
  try {
    const tools = await loadTools(entry);
    const missing = CORE_TOOLS.filter((tool) => !tools.includes(tool));
    if (missing.length === 0) return { name, level: "ok", detail: `${dir}: ${tools.length} tools` };
    return {
      name,
      level: "fail",
      detail: `${dir} loads but registers no ${missing.join(", ")}`,
      fix: `that copy is broken or not this plugin: ${repair(copy)}`,
    };
  } catch (error) {
    return {
      name,
      level: "fail",
      detail: `${dir} does not load: ${error instanceof Error ? error.message : String(error)}`,
      fix: `OpenCode drops such a plugin without a word: ${repair(copy)}`,
    };
  }
}

// `opencode-teams init`: make OpenCode load the plugin (or stop it with --undo) and make sure the storage dir stays out
// of git. A package from a registry goes into a config by name; one from a tarball, a path or a git URL gets a project
// plugin file that loads the installed copy. A config edit is a minimal text edit; a file that cannot be parsed is
// left untouched, and --undo takes out only what init writes.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import writeFileAtomic from "write-file-atomic";
import { resolveStorageRoot } from "../state/paths.ts";
import { ensureStorageRoot } from "../state/store.ts";
import {
  addPlugin,
  configFiles,
  createdConfig,
  NEW_CONFIG,
  PACKAGE_NAME,
  type ParsedConfig,
  PLUGIN_SPEC,
  parseConfig,
  removePlugin,
  splitBom,
} from "./plugin-config.ts";
import { PLUGIN_FILE, pluginFileState, removePluginFile, writePluginFile } from "./plugin-file.ts";
import { installSource } from "./plugin-source.ts";

export interface InitOptions {
  projectRoot: string;
  scope: "project" | "global";
  undo: boolean;
  env?: NodeJS.ProcessEnv;
}

export type ConfigChange = "added" | "created" | "already-there" | "removed" | "deleted" | "not-there";

export interface InitReport {
  change: ConfigChange;
  /** What loads the plugin: the config entry (`name@version`) or the project plugin file. */
  entry: string;
  /** The files touched or found (one for add, every file init's entry was taken out of for undo). */
  files: string[];
  /** Config files whose `name@version` entry init took out: OpenCode would fetch that from a registry instead. */
  replaced?: string[];
  /** Files left in place although they load the plugin: someone changed them since init wrote them. */
  kept?: string[];
  /** Where the storage dir is and whether git ignores it (undefined: the project is not a git repository). */
  storage?: { root: string; ignoredByGit: boolean | undefined };
}

type Change = Omit<InitReport, "storage">;

interface ConfigText {
  file: string;
  /** A byte order mark the file starts with, given back on write. */
  bom: string;
  text: string;
  parsed: ParsedConfig;
}

/** Every existing config file of the scope, parsed; throws ConfigFileError before anything is written. */
function readConfigs(files: string[]): ConfigText[] {
  return files
    .filter((file) => existsSync(file))
    .map((file) => {
      const { bom, body } = splitBom(readFileSync(file, "utf8"));
      return { file, bom, text: body, parsed: parseConfig(body, file) };
    });
}

async function addByName(files: string[], configs: ConfigText[], projectRoot?: string): Promise<Change> {
  const entry = PLUGIN_SPEC;
  const listing = configs.find((config) => config.parsed.ours.length > 0);
  if (listing) return { change: "already-there", entry, files: [listing.file] };
  // The plugin file of an earlier install from a tarball still loads the installed copy; a name would load it twice.
  if (projectRoot && pluginFileState(projectRoot) !== "absent") {
    return { change: "already-there", entry: PLUGIN_FILE, files: [path.join(projectRoot, PLUGIN_FILE)] };
  }
  const existing = configs[0];
  const file = existing?.file ?? files.find((f) => path.basename(f) === "opencode.json") ?? "";
  const text = existing?.text ?? NEW_CONFIG;
  const parsed = existing?.parsed ?? parseConfig(NEW_CONFIG, file);
  mkdirSync(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, (existing?.bom ?? "") + addPlugin(text, parsed, entry));
  return { change: existing ? "added" : "created", entry, files: [file] };
}

/** Take init's entries out of a config; the file goes only when it is still exactly what init created. */
async function takeOut({ file, bom, text, parsed }: ConfigText): Promise<"removed" | "deleted"> {
  const [only, ...others] = parsed.plugins;
  if (others.length === 0 && typeof only === "string" && !bom && text === createdConfig(only)) {
    rmSync(file);
    return "deleted";
  }
  await writeFileAtomic(file, bom + removePlugin(text, parsed));
  return "removed";
}

/** A package from a tarball, path or git URL: the project plugin file, replacing a name entry OpenCode cannot fetch. */
async function addFile(projectRoot: string, configs: ConfigText[]): Promise<Change> {
  const entry = PLUGIN_FILE;
  // An entry the user wrote (a path, a tuple with options) loads it already; a second loader would run it twice.
  const own = configs.filter((c) => c.parsed.ours.length > c.parsed.initEntries.length);
  if (own.length > 0) return { change: "already-there", entry, files: own.map((c) => c.file) };
  const file = path.join(projectRoot, PLUGIN_FILE);
  const change = pluginFileState(projectRoot) === "absent" ? "created" : "already-there";
  if (change === "created") await writePluginFile(projectRoot);
  // Only once the file is there: a failed write leaves the old entry, not nothing.
  const stale = configs.filter((c) => c.parsed.initEntries.length > 0);
  for (const config of stale) await takeOut(config);
  return {
    change,
    entry,
    files: [file],
    ...(stale.length > 0 ? { replaced: stale.map((c) => c.file) } : {}),
  };
}

async function remove(configs: ConfigText[], projectRoot: string | undefined): Promise<Change> {
  const listing = configs.filter((config) => config.parsed.initEntries.length > 0);
  const outcomes = [];
  for (const config of listing) outcomes.push(await takeOut(config));
  const fileOutcome = projectRoot === undefined ? "absent" : removePluginFile(projectRoot);
  const files = listing.map((c) => c.file);
  if (fileOutcome === "deleted" && projectRoot) files.push(path.join(projectRoot, PLUGIN_FILE));
  const kept = [
    ...configs.filter((c) => c.parsed.ours.length > c.parsed.initEntries.length).map((c) => c.file),
    ...(fileOutcome === "kept" && projectRoot ? [path.join(projectRoot, PLUGIN_FILE)] : []),
  ];
  const change: ConfigChange =
    outcomes.includes("deleted") || fileOutcome === "deleted"
      ? "deleted"
      : outcomes.length > 0
        ? "removed"
        : "not-there";
  return {
    change,
    entry: PACKAGE_NAME,
    files: change === "not-there" ? configs.map((c) => c.file) : files,
    ...(kept.length > 0 ? { kept } : {}),
  };
}

/** Whether git ignores `dir` inside the project; undefined when the project is not a git repository. */
function ignoredByGit(projectRoot: string, dir: string): boolean | undefined {
  const probe = path.join(dir, ".probe");
  const r = spawnSync("git", ["-C", projectRoot, "check-ignore", "-q", "--no-index", probe], {
    stdio: "ignore",
  });
  if (r.status === 0) return true;
  if (r.status === 1) return false;
  return undefined;
}

export async function runInit(options: InitOptions): Promise<InitReport> {
  const env = options.env ?? process.env;
  const files = configFiles(options.scope, options.projectRoot, env);
  const configs = readConfigs(files);
  const project = options.scope === "project" ? options.projectRoot : undefined;
  if (options.undo) return remove(configs, project);
  const local = project !== undefined && installSource(project).kind === "local";
  const result = local
    ? await addFile(options.projectRoot, configs)
    : await addByName(files, configs, project);
  // A global install names no project; each project's storage dir ignores itself when the plugin creates it.
  if (options.scope === "global") return result;
  const root = resolveStorageRoot(options.projectRoot, env);
  // The storage dir carries a `.gitignore` of `*`, so it ignores itself wherever it lives.
  await ensureStorageRoot(root);
  return { ...result, storage: { root, ignoredByGit: ignoredByGit(options.projectRoot, root) } };
}

function said(report: InitReport): string {
  const files = report.files.join(", ") || "(none exist)";
  switch (report.change) {
    case "added":
      return `added ${report.entry} to ${files}`;
    case "created":
      return report.entry === PLUGIN_FILE
        ? `created ${files}: it loads the ${PACKAGE_NAME} this project installed (node_modules), in every clone`
        : `created, with ${report.entry} in its plugin list, ${files}`;
    case "already-there":
      return `${PACKAGE_NAME} is already loaded by ${files}`;
    case "removed":
      return `removed ${PACKAGE_NAME} from ${files}`;
    case "deleted":
      return `removed ${PACKAGE_NAME} (and the files init had created): ${files}`;
    case "not-there":
      return `init's entry for ${PACKAGE_NAME} is not in the config files ${files}`;
  }
}

export function renderInit(report: InitReport): string {
  const lines = [said(report)];
  if (report.replaced) {
    lines.push(
      `took ${PLUGIN_SPEC} out of ${report.replaced.join(", ")}: OpenCode would fetch that name from a registry, not load your installed copy`,
    );
  }
  if (report.kept) {
    lines.push(
      `left as they are (changed since init wrote them, or written by you): ${report.kept.join(", ")}`,
    );
  }
  const storage = report.storage;
  if (storage) {
    const git =
      storage.ignoredByGit === undefined
        ? "not inside a git repository"
        : storage.ignoredByGit
          ? "ignored by git"
          : "NOT ignored by git: add it to .gitignore";
    lines.push(`storage: ${storage.root} (${git})`);
  }
  return lines.join("\n");
}

/** The three things to do after a successful init. */
export function nextSteps(projectRoot: string, report?: InitReport): string {
  const first =
    report?.entry === PLUGIN_FILE
      ? `start OpenCode in ${projectRoot} (\`opencode\`): it loads ${PLUGIN_FILE}; commit that file, and a clone loads the plugin after \`npm install\``
      : `start OpenCode in ${projectRoot} (\`opencode\`): it installs ${PLUGIN_SPEC} from the npm registry on its first start`;
  return [
    `next: 1. ${first}`,
    '      2. ask it to lead: "create a team and spawn a worker to <task>"; workers open in tmux panes',
    "      3. follow them with `npx opencode-teams status` (or `watch`); `npx opencode-teams init --undo` removes it",
  ].join("\n");
}

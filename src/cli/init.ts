// `opencode-teams init`: put the plugin in an OpenCode config (or take it out with --undo) and make sure the storage
// dir stays out of git. The config edit is a minimal text edit; a file that cannot be parsed is left untouched.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import writeFileAtomic from "write-file-atomic";
import { resolveStorageRoot } from "../state/paths.ts";
import { ensureStorageRoot } from "../state/store.ts";
import {
  addPlugin,
  configFiles,
  NEW_CONFIG,
  PACKAGE_NAME,
  type ParsedConfig,
  PLUGIN_SPEC,
  parseConfig,
  removePlugin,
} from "./plugin-config.ts";

export interface InitOptions {
  projectRoot: string;
  scope: "project" | "global";
  undo: boolean;
  env?: NodeJS.ProcessEnv;
}

export type ConfigChange = "added" | "created" | "already-there" | "removed" | "deleted" | "not-there";

export interface InitReport {
  change: ConfigChange;
  /** The config files touched or found (one for add, every file that listed the plugin for undo). */
  files: string[];
  /** Where the storage dir is and whether git ignores it (undefined: the project is not a git repository). */
  storage?: { root: string; ignoredByGit: boolean | undefined };
}

interface ConfigText {
  file: string;
  text: string;
  parsed: ParsedConfig;
}

/** Every existing config file of the scope, parsed; throws ConfigFileError before anything is written. */
function readConfigs(files: string[]): ConfigText[] {
  return files
    .filter((file) => existsSync(file))
    .map((file) => {
      const text = readFileSync(file, "utf8");
      return { file, text, parsed: parseConfig(text, file) };
    });
}

async function add(files: string[], configs: ConfigText[]): Promise<Pick<InitReport, "change" | "files">> {
  const listing = configs.find((config) => config.parsed.ours.length > 0);
  if (listing) return { change: "already-there", files: [listing.file] };
  const existing = configs[0];
  const file = existing?.file ?? files.find((f) => path.basename(f) === "opencode.json") ?? "";
  const text = existing?.text ?? NEW_CONFIG;
  const parsed = existing?.parsed ?? parseConfig(NEW_CONFIG, file);
  mkdirSync(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, addPlugin(text, parsed, PLUGIN_SPEC));
  return { change: existing ? "added" : "created", files: [file] };
}

async function remove(configs: ConfigText[]): Promise<Pick<InitReport, "change" | "files">> {
  const listing = configs.filter((config) => config.parsed.ours.length > 0);
  if (listing.length === 0) return { change: "not-there", files: configs.map((c) => c.file) };
  let deleted = false;
  for (const { file, text, parsed } of listing) {
    const out = removePlugin(text, parsed);
    // A file that holds nothing but what `init` created it with goes, so init + undo leaves no trace.
    if (out === NEW_CONFIG) {
      rmSync(file);
      deleted = true;
    } else await writeFileAtomic(file, out);
  }
  return { change: deleted ? "deleted" : "removed", files: listing.map((c) => c.file) };
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
  if (options.undo) return remove(configs);
  const result = await add(files, configs);
  // A global install names no project; each project's storage dir ignores itself when the plugin creates it.
  if (options.scope === "global") return result;
  const root = resolveStorageRoot(options.projectRoot, env);
  // The storage dir carries a `.gitignore` of `*`, so it ignores itself wherever it lives.
  await ensureStorageRoot(root);
  return { ...result, storage: { root, ignoredByGit: ignoredByGit(options.projectRoot, root) } };
}

const SAID: Record<ConfigChange, string> = {
  added: `added ${PLUGIN_SPEC} to`,
  created: `created, with ${PLUGIN_SPEC} in its plugin list,`,
  "already-there": `${PACKAGE_NAME} is already listed in`,
  removed: `removed ${PACKAGE_NAME} from`,
  deleted: `removed ${PACKAGE_NAME} (and the file init had created):`,
  "not-there": `${PACKAGE_NAME} is not listed in the config files`,
};

export function renderInit(report: InitReport): string {
  const lines = [`${SAID[report.change]} ${report.files.join(", ") || "(none exist)"}`];
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
export function nextSteps(projectRoot: string): string {
  return [
    `next: 1. start OpenCode in ${projectRoot} (\`opencode\`): it installs ${PLUGIN_SPEC} on its first start`,
    '      2. ask it to lead: "create a team and spawn a worker to <task>"; workers open in tmux panes',
    "      3. follow them with `npx opencode-teams status` (or `watch`); `npx opencode-teams init --undo` removes it",
  ].join("\n");
}

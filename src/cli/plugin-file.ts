// The project plugin file `init` writes when the package did not come from a registry. OpenCode loads every file in
// `.opencode/plugins/`; this one re-exports the installed package, and its import resolves like any module's: from
// `.opencode/node_modules` (where OpenCode installs only its own `@opencode-ai/plugin`), then the project's
// node_modules. No absolute path, so every clone loads the copy its own `npm install` put there.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import path from "node:path";
import writeFileAtomic from "write-file-atomic";
import { PACKAGE_NAME } from "./plugin-config.ts";

/** The file, relative to the project root. */
export const PLUGIN_FILE = path.join(".opencode", "plugins", `${PACKAGE_NAME}.ts`);

/** Its text: only a default export, since OpenCode 1.x calls every exported value as a plugin. */
export const PLUGIN_FILE_TEXT = [
  "// Written by `opencode-teams init`: OpenCode loads every file in this folder, and this one loads the",
  "// opencode-teams this project installed (its node_modules), so each clone loads its own copy after `npm install`.",
  "// `npx opencode-teams init --undo` removes this file.",
  `export { default } from "${PACKAGE_NAME}";`,
  "",
].join("\n");

/** `absent`, `ours` (exactly as init wrote it) or `changed` (someone edited it, or wrote their own). */
export function pluginFileState(projectRoot: string): "absent" | "ours" | "changed" {
  const file = path.join(projectRoot, PLUGIN_FILE);
  if (!existsSync(file)) return "absent";
  return readFileSync(file, "utf8") === PLUGIN_FILE_TEXT ? "ours" : "changed";
}

export async function writePluginFile(projectRoot: string): Promise<string> {
  const file = path.join(projectRoot, PLUGIN_FILE);
  mkdirSync(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, PLUGIN_FILE_TEXT);
  return file;
}

/** Delete the file if it is exactly what init wrote; a changed file is the user's and stays. */
export function removePluginFile(projectRoot: string): "deleted" | "kept" | "absent" {
  const state = pluginFileState(projectRoot);
  if (state !== "ours") return state === "absent" ? "absent" : "kept";
  const file = path.join(projectRoot, PLUGIN_FILE);
  rmSync(file);
  // The folder goes too when nothing else is in it (init made it); a folder with the user's own plugins stays.
  if (readdirSync(path.dirname(file)).length === 0) rmdirSync(path.dirname(file));
  return "deleted";
}

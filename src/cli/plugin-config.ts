// Reading and editing the `plugin` list of an OpenCode config file (JSON with comments) without disturbing the rest of
// the text: every edit is a minimal text edit computed by jsonc-parser, so comments, order and formatting stay.
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  applyEdits,
  type FormattingOptions,
  findNodeAtLocation,
  modify,
  type ParseError,
  parse,
  parseTree,
  printParseErrorCode,
} from "jsonc-parser";
import packageJson from "../../package.json" with { type: "json" };

export const PACKAGE_NAME = packageJson.name;
/** What `init` adds: this very version, so the plugin OpenCode installs matches the CLI that configured it. */
export const PLUGIN_SPEC = `${packageJson.name}@${packageJson.version}`;

export class ConfigFileError extends Error {}

/** The package name an npm plugin spec names (`name`, `name@range`, `@scope/name@range`). */
function npmName(spec: string): string {
  const at = spec.indexOf("@", spec.startsWith("@") ? 1 : 0);
  return at === -1 ? spec : spec.slice(0, at);
}

/** The name in the nearest package.json at or above `start`. */
function packageNameAbove(start: string): string | undefined {
  let dir = start;
  for (;;) {
    const file = path.join(dir, "package.json");
    if (existsSync(file)) {
      try {
        const name: unknown = JSON.parse(readFileSync(file, "utf8")).name;
        if (typeof name === "string") return name;
      } catch {
        // an unreadable package.json names nothing; keep looking above it
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** A spec OpenCode loads from a path rather than installing it from npm. */
export function isPathSpec(spec: string): boolean {
  return spec.startsWith("file://") || spec.startsWith(".") || path.isAbsolute(spec);
}

/** Whether a `plugin` entry's spec loads this package: by npm name (any version) or by a path into a copy of it. */
export function isOurSpec(spec: string, configDir: string): boolean {
  if (!isPathSpec(spec)) return npmName(spec) === PACKAGE_NAME;
  const target = spec.startsWith("file://") ? fileURLToPath(spec) : path.resolve(configDir, spec);
  return packageNameAbove(target) === PACKAGE_NAME;
}

/** The spec of a `plugin` entry: a string, or the first element of a `[spec, options]` tuple. */
function specOf(entry: unknown): string | undefined {
  if (typeof entry === "string") return entry;
  if (Array.isArray(entry) && typeof entry[0] === "string") return entry[0];
  return undefined;
}

export interface ParsedConfig {
  plugins: unknown[];
  /** Indexes of the entries that load this package. */
  ours: number[];
  /** Indexes of the entries `init` writes (a bare npm spec of this package); `--undo` takes out only these. */
  initEntries: number[];
}

/** A spec as `init` writes it: a plain string naming this package on npm. A tuple with options is the user's own. */
function isInitEntry(entry: unknown): boolean {
  return typeof entry === "string" && !isPathSpec(entry) && npmName(entry) === PACKAGE_NAME;
}

const BOM = "\uFEFF";

/** A config's text split at its byte order mark: edits work on `body`, the file gets `bom + body` back. */
export function splitBom(text: string): { bom: string; body: string } {
  return text.startsWith(BOM) ? { bom: BOM, body: text.slice(1) } : { bom: "", body: text };
}

/** JSON keeps only the last of two equal keys, so an entry added to the first would be ignored while init says done. */
function refuseDuplicatePluginKeys(text: string, file: string): void {
  const keys = (parseTree(text)?.children ?? []).filter((prop) => prop.children?.[0]?.value === "plugin");
  if (keys.length < 2) return;
  const lines = keys.map((key) => lineCol(text, key.offset).split(",")[0]).join(" and ");
  throw new ConfigFileError(
    `${file} has "plugin" ${keys.length === 2 ? "twice" : `${keys.length} times`} (${lines}); JSON keeps only the last, so merge them into one list, then run this again`,
  );
}

function lineCol(text: string, offset: number): string {
  const before = text.slice(0, offset).split("\n");
  return `line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`;
}

/** Parse a config's text; throws ConfigFileError (naming the place) when it is not a JSONC object with a plugin list. */
export function parseConfig(withBom: string, file: string): ParsedConfig {
  const text = splitBom(withBom).body;
  const errors: ParseError[] = [];
  const root: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  const [first] = errors;
  if (first) {
    throw new ConfigFileError(
      `${file} is not valid JSON(C): ${printParseErrorCode(first.error)} at ${lineCol(text, first.offset)}`,
    );
  }
  if (typeof root !== "object" || root === null || Array.isArray(root)) {
    throw new ConfigFileError(`${file} does not hold a JSON object`);
  }
  refuseDuplicatePluginKeys(text, file);
  const plugins: unknown = (root as { plugin?: unknown }).plugin ?? [];
  if (!Array.isArray(plugins)) throw new ConfigFileError(`${file}: "plugin" is not a list`);
  const dir = path.dirname(file);
  const ours = plugins.flatMap((entry, index) => {
    const spec = specOf(entry);
    return spec !== undefined && isOurSpec(spec, dir) ? [index] : [];
  });
  const initEntries = plugins.flatMap((entry, index) => (isInitEntry(entry) ? [index] : []));
  return { plugins, ours, initEntries };
}

/** Indentation and line ends as the file already uses them, so an inserted line looks like its neighbours. */
function formattingOf(text: string): FormattingOptions {
  const indent = /\n([ \t]+)\S/.exec(text)?.[1] ?? "  ";
  return {
    insertSpaces: !indent.startsWith("\t"),
    tabSize: indent.startsWith("\t") ? 1 : indent.length,
    eol: text.includes("\r\n") ? "\r\n" : "\n",
  };
}

/** The text with `spec` appended to the plugin list (the list is created when missing). */
export function addPlugin(text: string, parsed: ParsedConfig, spec: string): string {
  const formattingOptions = formattingOf(text);
  // An empty or missing list is (re)written whole; a list with entries gets one more at its end.
  const edits =
    parsed.plugins.length > 0
      ? modify(text, ["plugin", parsed.plugins.length], spec, { formattingOptions, isArrayInsertion: true })
      : modify(text, ["plugin"], [spec], { formattingOptions });
  return applyEdits(text, edits);
}

/**
 * The text without the plugin list's element `index`, and the separator that came with it: the comma and space before
 * it when it is the last, else everything up to the next element. `init` appends, so `--undo` takes back exactly that.
 */
function withoutElement(text: string, index: number): string {
  const root = parseTree(text);
  const list = root && findNodeAtLocation(root, ["plugin"]);
  const items = list?.children ?? [];
  const item = items[index];
  if (!item) return text;
  const previous = items[index - 1];
  const next = items[index + 1];
  const [from, to] = next
    ? [item.offset, next.offset]
    : previous
      ? [previous.offset + previous.length, item.offset + item.length]
      : [item.offset, item.offset + item.length];
  return text.slice(0, from) + text.slice(to);
}

/** The text without the entries `init` writes; a list left empty is removed with its key. */
export function removePlugin(text: string, parsed: ParsedConfig): string {
  if (parsed.initEntries.length === parsed.plugins.length) {
    return applyEdits(text, modify(text, ["plugin"], undefined, { formattingOptions: formattingOf(text) }));
  }
  return [...parsed.initEntries].reverse().reduce(withoutElement, text);
}

/** A new config file holding only the schema reference; `init` adds the plugin to it like to any other file. */
export const NEW_CONFIG = '{\n  "$schema": "https://opencode.ai/config.json"\n}\n';

/** The text of a file `init` created holding `spec`: the only file `--undo` may delete, and only while it is unchanged. */
export function createdConfig(spec: string): string {
  return addPlugin(NEW_CONFIG, parseConfig(NEW_CONFIG, "new"), spec);
}

/** An XDG base dir: the variable when it holds an absolute path (the spec says to ignore a relative one), else the default under HOME. */
export function xdgDir(
  env: NodeJS.ProcessEnv,
  variable: "XDG_CONFIG_HOME" | "XDG_CACHE_HOME",
  fallback: string,
): string {
  const value = env[variable]?.trim();
  return value && path.isAbsolute(value) ? value : path.join(env.HOME || os.homedir(), fallback);
}

/** OpenCode's user config dir: `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`. */
export function globalConfigDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(xdgDir(env, "XDG_CONFIG_HOME", ".config"), "opencode");
}

/** The config files OpenCode reads for a scope, in the order `init` picks one to edit (the first that exists). */
export function configFiles(scope: "project" | "global", projectRoot: string, env = process.env): string[] {
  if (scope === "global") {
    const dir = globalConfigDir(env);
    return ["opencode.jsonc", "opencode.json", "config.json"].map((name) => path.join(dir, name));
  }
  return [
    path.join(projectRoot, "opencode.jsonc"),
    path.join(projectRoot, "opencode.json"),
    path.join(projectRoot, ".opencode", "opencode.jsonc"),
    path.join(projectRoot, ".opencode", "opencode.json"),
  ];
}

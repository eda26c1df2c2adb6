import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { runInit } from "../../src/cli/init.ts";
import { ConfigFileError, PLUGIN_SPEC } from "../../src/cli/plugin-config.ts";
import { PLUGIN_FILE, PLUGIN_FILE_TEXT } from "../../src/cli/plugin-file.ts";
import { installSource } from "../../src/cli/plugin-source.ts";

const REPO = path.join(import.meta.dir, "..", "..");
const CLI = path.join(REPO, "src", "cli", "main.ts");
let dir: string;
let project: string;
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "oct-init-"));
  project = path.join(dir, "project");
  mkdirSync(project);
  spawnSync("git", ["init", "-q"], { cwd: project });
  env = {
    HOME: path.join(dir, "home"),
    XDG_CONFIG_HOME: path.join(dir, "config"),
    XDG_CACHE_HOME: path.join(dir, "cache"),
    // doctor asks the registry about a name entry: an unreachable one here, never the real one.
    npm_config_registry: "http://127.0.0.1:9/",
  };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const init = (undo = false, scope: "project" | "global" = "project") =>
  runInit({ projectRoot: project, scope, undo, env });

const WITH_COMMENTS = `{
    // the model every agent uses
    "model": "anthropic/claude", /* pinned */
    "plugin": [
        "some-other-plugin", // keep me
    ],
}
`;

describe("opencode-teams init", () => {
  test("adds the plugin to a config with comments and changes nothing else", async () => {
    const file = path.join(project, "opencode.jsonc");
    writeFileSync(file, WITH_COMMENTS);
    const report = await init();
    expect(report).toMatchObject({ change: "added", files: [file] });
    const after = readFileSync(file, "utf8");
    // Byte-identical outside the one inserted entry, in the file's own indentation.
    expect(after).toBe(
      WITH_COMMENTS.replace('"some-other-plugin",', `"some-other-plugin",\n        "${PLUGIN_SPEC}",`),
    );
    expect(report.storage?.ignoredByGit).toBe(true);
  });

  test("a config without a plugin list gets one; no config at all gets a new opencode.json", async () => {
    const file = path.join(project, ".opencode", "opencode.json");
    mkdirSync(path.dirname(file));
    writeFileSync(file, '{\n\t"model": "x/y"\n}\n');
    expect(await init()).toMatchObject({ change: "added", files: [file] });
    expect(readFileSync(file, "utf8")).toBe(
      `{\n\t"model": "x/y",\n\t"plugin": [\n\t\t"${PLUGIN_SPEC}"\n\t]\n}\n`,
    );
    rmSync(file);
    expect(await init()).toMatchObject({ change: "created", files: [path.join(project, "opencode.json")] });
    expect(JSON.parse(readFileSync(path.join(project, "opencode.json"), "utf8")).plugin).toEqual([
      PLUGIN_SPEC,
    ]);
  });

  test.each([
    ["a bare name", '"opencode-teams"'],
    ["another version", '"opencode-teams@9.9.9"'],
    ["a tuple with options", '["opencode-teams@latest", { "tmuxSocket": "x" }]'],
    [
      "a file:// path into a copy of this package",
      JSON.stringify(pathToFileURL(path.join(REPO, "src", "index.ts")).href),
    ],
    ["a plain path to the package dir", JSON.stringify(REPO)],
  ])("a config that already lists the plugin as %s is left as it was", async (_, entry) => {
    const file = path.join(project, "opencode.json");
    const text = `{ "plugin": [${entry}] } // mine\n`;
    writeFileSync(file, text);
    const before = statSync(file).mtimeMs;
    expect(await init()).toMatchObject({ change: "already-there", files: [file] });
    expect(readFileSync(file, "utf8")).toBe(text);
    expect(statSync(file).mtimeMs).toBe(before);
  });

  test("--undo after init gives back the file byte for byte, and deletes a file init created", async () => {
    const file = path.join(project, "opencode.jsonc");
    writeFileSync(file, WITH_COMMENTS);
    await init();
    expect(await init(true)).toMatchObject({ change: "removed", files: [file] });
    expect(readFileSync(file, "utf8")).toBe(WITH_COMMENTS);
    expect(await init(true)).toMatchObject({ change: "not-there" });

    const lonely = '{\n  "model": "x/y"\n}\n';
    writeFileSync(file, lonely);
    await init();
    await init(true);
    expect(readFileSync(file, "utf8")).toBe(lonely);

    rmSync(file);
    await init();
    expect(existsSync(path.join(project, "opencode.json"))).toBe(true);
    expect(await init(true)).toMatchObject({ change: "deleted" });
    expect(existsSync(path.join(project, "opencode.json"))).toBe(false);
  });

  test("--global edits $XDG_CONFIG_HOME/opencode, not the project", async () => {
    const report = await init(false, "global");
    const file = path.join(dir, "config", "opencode", "opencode.json");
    expect(report).toMatchObject({ change: "created", files: [file] });
    expect(JSON.parse(readFileSync(file, "utf8")).plugin).toEqual([PLUGIN_SPEC]);
    expect(existsSync(path.join(project, "opencode.json"))).toBe(false);
    expect(report.storage).toBeUndefined();
    expect(existsSync(path.join(project, ".opencode"))).toBe(false);
    expect(await init(false, "global")).toMatchObject({ change: "already-there" });
    expect(await init(true, "global")).toMatchObject({ change: "deleted" });
  });

  test("a damaged config is named with the place of the damage and left untouched", async () => {
    const file = path.join(project, "opencode.json");
    const text = '{\n  "model": "x/y"\n  "plugin": []\n}\n';
    writeFileSync(file, text);
    const error = await init().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigFileError);
    expect((error as Error).message).toBe(`${file} is not valid JSON(C): CommaExpected at line 3, column 3`);
    expect(readFileSync(file, "utf8")).toBe(text);
    writeFileSync(file, '{ "plugin": "opencode-teams" }');
    expect(init()).rejects.toThrow('"plugin" is not a list');
  });

  test("the CLI: init prints what changed, doctor's plugin checks and three next steps; a damaged file exits 1", async () => {
    const run = (args: string[]) =>
      spawnSync(process.execPath, [CLI, ...args, "--dir", project, "--no-color"], {
        encoding: "utf8",
        env: { ...process.env, ...env, OPENCODE_TEAMS_DIR: "" },
      });
    const out = run(["init"]);
    expect(out.stdout).toContain(
      `created, with ${PLUGIN_SPEC} in its plugin list, ${path.join(project, "opencode.json")}`,
    );
    expect(out.stdout).toMatch(/✓ plugin config: opencode-teams@/);
    expect(out.stdout).toMatch(/! plugin loads: OpenCode has not installed/);
    expect(out.stdout.split("\n").filter((line) => /^next: 1\.|^ {6}[23]\. /.test(line))).toHaveLength(3);
    writeFileSync(path.join(project, "opencode.json"), "{ oops");
    const damaged = run(["init"]);
    expect(damaged.status).toBe(1);
    expect(damaged.stderr).toContain("is not valid JSON(C)");
    expect(readFileSync(path.join(project, "opencode.json"), "utf8")).toBe("{ oops");
    // Two CLI runs, each with doctor (tmux, opencode --version): seconds on a loaded machine.
  }, 30_000);
});

describe("init never harms a config", () => {
  test("a config that starts with a UTF-8 BOM is read and edited, and keeps its BOM", async () => {
    const file = path.join(project, "opencode.json");
    const text = '\uFEFF{\n  "model": "x/y"\n}\n';
    writeFileSync(file, text);
    expect(await init()).toMatchObject({ change: "added", files: [file] });
    const after = readFileSync(file, "utf8");
    expect(after.startsWith("\uFEFF{")).toBe(true);
    expect(JSON.parse(after.slice(1)).plugin).toEqual([PLUGIN_SPEC]);
    expect(await init(true)).toMatchObject({ change: "removed" });
    expect(readFileSync(file, "utf8")).toBe(text);
  });

  test("a config with two plugin keys is refused, naming both, and left untouched", async () => {
    const file = path.join(project, "opencode.json");
    const text = '{\n  "plugin": ["a"],\n  "model": "x/y",\n  "plugin": ["b"]\n}\n';
    writeFileSync(file, text);
    const error = await init().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigFileError);
    expect((error as Error).message).toContain('"plugin" twice (line 2 and line 4)');
    expect(readFileSync(file, "utf8")).toBe(text);
    expect(init(true)).rejects.toThrow('"plugin" twice');
  });

  test("--undo keeps a file init created once the user changed it, and a tuple the user gave options", async () => {
    const file = path.join(project, "opencode.json");
    await init();
    // The user gives the entry options: that entry is theirs now, and so is the file.
    const own = `{\n  "$schema": "https://opencode.ai/config.json",\n  "plugin": [["${PLUGIN_SPEC}", { "tmuxSocket": "x" }]]\n}\n`;
    writeFileSync(file, own);
    expect(await init(true)).toMatchObject({ change: "not-there" });
    expect(readFileSync(file, "utf8")).toBe(own);
    // Re-formatted by the user: the entry goes, the file stays.
    writeFileSync(file, `{"$schema": "https://opencode.ai/config.json", "plugin": ["${PLUGIN_SPEC}"]}\n`);
    expect(await init(true)).toMatchObject({ change: "removed", files: [file] });
    expect(existsSync(file)).toBe(true);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ $schema: "https://opencode.ai/config.json" });
  });

  test.each(["relative/config", "./x", ""])("a relative XDG_CONFIG_HOME (%p) is ignored", async (value) => {
    env.XDG_CONFIG_HOME = value;
    const report = await init(false, "global");
    expect(report.files).toEqual([path.join(dir, "home", ".config", "opencode", "opencode.json")]);
    // A relative value would land wherever the command runs: here, the test's working directory.
    expect(existsSync(path.resolve("relative"))).toBe(false);
    expect(existsSync(path.resolve("x"))).toBe(false);
  });
});

describe("init loads the copy the project installed, however it arrived", () => {
  const pluginFile = () => path.join(project, ".opencode", "plugins", "opencode-teams.ts");
  const devDependency = (spec: string) =>
    writeFileSync(
      path.join(project, "package.json"),
      JSON.stringify({ name: "p", devDependencies: { "opencode-teams": spec } }),
    );

  test.each([
    ["registry", "^0.1.0"],
    ["registry", "latest"],
    ["registry", "npm:opencode-teams@0.1.0"],
    ["local", "file:opencode-teams-0.1.0.tgz"],
    ["local", "file:../opencode-teams"],
    ["local", "./opencode-teams-0.1.0.tgz"],
    ["local", "git+https://example.invalid/me/opencode-teams.git"],
    ["local", "github:me/opencode-teams#main"],
    ["local", "me/opencode-teams"],
    ["local", "https://example.invalid/opencode-teams-0.1.0.tgz"],
    ["local", "workspace:*"],
    ["local", "link:../opencode-teams"],
  ])("package.json spec: %s for %p", (kind, spec) => {
    devDependency(spec);
    expect(installSource(project)).toMatchObject({ kind, spec });
  });

  test("the lockfile tells when package.json does not: a link or a file: resolved is local", () => {
    const lock = (entry: unknown) =>
      writeFileSync(
        path.join(project, "package-lock.json"),
        JSON.stringify({ packages: { "node_modules/opencode-teams": entry } }),
      );
    expect(installSource(project)).toEqual({ kind: "absent" });
    lock({ resolved: "../opencode-teams", link: true });
    expect(installSource(project).kind).toBe("local");
    lock({ resolved: "https://registry.npmjs.org/opencode-teams/-/opencode-teams-0.1.0.tgz" });
    expect(installSource(project).kind).toBe("registry");
  });

  test("from a tarball: a plugin file that re-exports the installed package, replacing a name entry init wrote before", async () => {
    devDependency("file:opencode-teams-0.1.0.tgz");
    const config = path.join(project, "opencode.jsonc");
    writeFileSync(config, WITH_COMMENTS);
    await init();
    // An older init wrote the name, which OpenCode fetches from a registry that does not have it.
    writeFileSync(
      config,
      WITH_COMMENTS.replace('"some-other-plugin",', `"some-other-plugin", "${PLUGIN_SPEC}",`),
    );
    const report = await init();
    expect(report).toMatchObject({ change: "already-there", replaced: [config] });
    expect(readFileSync(config, "utf8")).toBe(WITH_COMMENTS);
    const text = readFileSync(pluginFile(), "utf8");
    expect(text).toBe(PLUGIN_FILE_TEXT);
    expect(text).toContain('export { default } from "opencode-teams";');
    expect(text).not.toContain(project);
    expect(await init(true)).toMatchObject({ change: "deleted", files: [pluginFile()] });
    expect(existsSync(pluginFile())).toBe(false);
    // The folder init made for it goes too; the storage dir beside it stays.
    expect(existsSync(path.dirname(pluginFile()))).toBe(false);
    expect(existsSync(path.join(project, ".opencode", "opencode-teams"))).toBe(true);
    expect(readFileSync(config, "utf8")).toBe(WITH_COMMENTS);
  });

  test("a fresh project from a path install: created, and --undo keeps the plugin file once the user changed it", async () => {
    devDependency("file:../opencode-teams");
    expect(await init()).toMatchObject({ change: "created", entry: PLUGIN_FILE, files: [pluginFile()] });
    expect(existsSync(path.join(project, "opencode.json"))).toBe(false);
    expect(await init()).toMatchObject({ change: "already-there" });
    writeFileSync(pluginFile(), `${PLUGIN_FILE_TEXT}// mine\n`);
    expect(await init(true)).toMatchObject({ change: "not-there", kept: [pluginFile()] });
    expect(readFileSync(pluginFile(), "utf8")).toContain("// mine");
  });

  test("a user's own path or tuple entry already loads it: no second loader", async () => {
    devDependency("file:../opencode-teams");
    const config = path.join(project, "opencode.json");
    writeFileSync(config, `{ "plugin": [["${PLUGIN_SPEC}", { "tmuxSocket": "x" }]] }`);
    expect(await init()).toMatchObject({ change: "already-there", files: [config] });
    expect(existsSync(pluginFile())).toBe(false);
  });

  test("from a registry the name entry stays as before", async () => {
    devDependency("^0.1.0");
    expect(await init()).toMatchObject({ change: "created", entry: PLUGIN_SPEC });
    expect(existsSync(pluginFile())).toBe(false);
  });
});

test("a project that switched from a tarball to the registry keeps the plugin file: no second loader by name", async () => {
  const devDependency = (spec: string) =>
    writeFileSync(
      path.join(project, "package.json"),
      JSON.stringify({ name: "p", devDependencies: { "opencode-teams": spec } }),
    );
  devDependency("file:opencode-teams-0.1.0.tgz");
  await init();
  devDependency("^0.1.0");
  expect(await init()).toMatchObject({ change: "already-there", entry: PLUGIN_FILE });
  expect(existsSync(path.join(project, "opencode.json"))).toBe(false);
});

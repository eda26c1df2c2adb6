import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { runInit } from "../../src/cli/init.ts";
import { ConfigFileError, PLUGIN_SPEC } from "../../src/cli/plugin-config.ts";

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
  });
});

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { checkPluginConfigured, checkPluginLoads } from "../../src/cli/doctor-plugin.ts";
import { PLUGIN_SPEC } from "../../src/cli/plugin-config.ts";

const REPO = path.join(import.meta.dir, "..", "..");
let dir: string;
let project: string;
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "oct-doctor-plugin-"));
  project = path.join(dir, "project");
  mkdirSync(project);
  env = { HOME: dir, XDG_CONFIG_HOME: path.join(dir, "config"), XDG_CACHE_HOME: path.join(dir, "cache") };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const config = (entry: unknown) =>
  writeFileSync(path.join(project, "opencode.json"), JSON.stringify({ plugin: [entry] }));

/** A package named opencode-teams whose entry is `source`, where OpenCode 1.x installs `spec`. */
function installedCopy(spec: string, source: string): string {
  const copy = path.join(dir, "cache", "opencode", "packages", spec, "node_modules", "opencode-teams");
  mkdirSync(copy, { recursive: true });
  writeFileSync(
    path.join(copy, "package.json"),
    '{ "name": "opencode-teams", "exports": { ".": "./entry.ts" } }',
  );
  writeFileSync(path.join(copy, "entry.ts"), source);
  return copy;
}

describe("doctor: the plugin", () => {
  test("not configured: fail, and the fix is init", async () => {
    expect(checkPluginConfigured(project, env)).toMatchObject({
      level: "fail",
      fix: expect.stringContaining("init"),
    });
    expect(await checkPluginLoads(project, env)).toMatchObject({ level: "warn" });
  });

  test("configured in the global config counts too", () => {
    mkdirSync(path.join(dir, "config", "opencode"), { recursive: true });
    writeFileSync(path.join(dir, "config", "opencode", "opencode.json"), '{ "plugin": ["opencode-teams"] }');
    expect(checkPluginConfigured(project, env)).toMatchObject({ level: "ok" });
  });

  test("configured by npm name but not installed by OpenCode yet: warn, start opencode once", async () => {
    config(PLUGIN_SPEC);
    expect(await checkPluginLoads(project, env)).toMatchObject({
      level: "warn",
      fix: expect.stringContaining("start `opencode`"),
    });
  });

  test("the checkout by file:// path loads and registers the tools", async () => {
    config([pathToFileURL(path.join(REPO, "src", "index.ts")).href, { tmuxSocket: "x" }]);
    const check = await checkPluginLoads(project, env);
    expect(check).toMatchObject({ level: "ok" });
    expect(check.detail).toMatch(/: \d+ tools$/);
  });

  test("an installed copy that fails to import: fail, delete OpenCode's install dir", async () => {
    config(PLUGIN_SPEC);
    installedCopy(PLUGIN_SPEC, 'import "./missing-module.ts";\nexport default async () => ({});\n');
    const check = await checkPluginLoads(project, env);
    expect(check.level).toBe("fail");
    expect(check.detail).toContain("does not load");
    expect(check.fix).toContain(`delete ${path.join(dir, "cache", "opencode", "packages", PLUGIN_SPEC)}`);
  });

  test("a bare name is looked up as name@latest; a non-function export is what OpenCode 1.x refuses", async () => {
    config("opencode-teams");
    installedCopy("opencode-teams@latest", "export const version = 1;\n");
    expect((await checkPluginLoads(project, env)).detail).toContain("exports a number");
  });

  test("a copy that loads but registers none of the tools: fail", async () => {
    config(PLUGIN_SPEC);
    installedCopy(PLUGIN_SPEC, "export default async () => ({ tool: {} });\n");
    const check = await checkPluginLoads(project, env);
    expect(check).toMatchObject({ level: "fail" });
    expect(check.detail).toContain("registers no create-team, spawn-agent, heartbeat");
  });
});

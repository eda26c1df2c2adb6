import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { checkPluginConfigured, checkPluginLoads } from "../../src/cli/doctor-plugin.ts";
import { PLUGIN_SPEC } from "../../src/cli/plugin-config.ts";
import { PLUGIN_FILE_TEXT } from "../../src/cli/plugin-file.ts";

const REPO = path.join(import.meta.dir, "..", "..");
let dir: string;
let project: string;
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "oct-doctor-plugin-"));
  project = path.join(dir, "project");
  mkdirSync(project);
  env = {
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, "config"),
    XDG_CACHE_HOME: path.join(dir, "cache"),
    // Nothing listens on port 9: the registry is unreachable, and quickly so.
    npm_config_registry: "http://127.0.0.1:9/",
  };
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

  /** A registry on 127.0.0.1 that knows opencode-teams at `versions` (none: 404). */
  function registry(versions: string[]): { url: string; stop: () => void } {
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) =>
        new URL(request.url).pathname === "/opencode-teams" && versions.length > 0
          ? Response.json({
              name: "opencode-teams",
              versions: Object.fromEntries(versions.map((v) => [v, {}])),
            })
          : Response.json({ error: "not found" }, { status: 404 }),
    });
    return { url: `http://127.0.0.1:${server.port}/`, stop: () => server.stop(true) };
  }

  test("the empty cache folder OpenCode leaves for an unpublished name: fail, the real cause, install from a tarball", async () => {
    config(PLUGIN_SPEC);
    const installDir = path.join(dir, "cache", "opencode", "packages", PLUGIN_SPEC);
    mkdirSync(installDir, { recursive: true });
    const reg = registry([]);
    try {
      const check = await checkPluginLoads(project, { ...env, npm_config_registry: reg.url });
      expect(check.level).toBe("fail");
      expect(check.detail).toContain(`left ${installDir} empty`);
      expect(check.detail).toContain(`${reg.url} has no opencode-teams`);
      expect(check.fix).toContain("npm pack");
      expect(check.fix).toContain("npx opencode-teams init");
      expect(check.fix).not.toContain("start `opencode`");
    } finally {
      reg.stop();
    }
  });

  test("not started yet, and the registry lacks that version: fail before the user waits for nothing", async () => {
    config(PLUGIN_SPEC);
    const reg = registry(["0.0.1"]);
    try {
      const check = await checkPluginLoads(project, { ...env, npm_config_registry: reg.url });
      expect(check.level).toBe("fail");
      expect(check.detail).toContain(`has no ${PLUGIN_SPEC}`);
    } finally {
      reg.stop();
    }
  });

  test("a name entry while the project installed it from a tarball: fail, init again writes the plugin file", async () => {
    config(PLUGIN_SPEC);
    writeFileSync(
      path.join(project, "package.json"),
      JSON.stringify({ devDependencies: { "opencode-teams": "file:opencode-teams-0.1.0.tgz" } }),
    );
    mkdirSync(path.join(dir, "cache", "opencode", "packages", PLUGIN_SPEC), { recursive: true });
    const check = await checkPluginLoads(project, env);
    expect(check.level).toBe("fail");
    expect(check.detail).toContain("file:opencode-teams-0.1.0.tgz");
    expect(check.fix).toContain("npx opencode-teams init");
    expect(check.fix).toContain(".opencode/plugins/opencode-teams.ts");
  });

  test("the project plugin file init writes: configured, and it loads the project's node_modules copy", async () => {
    const plugins = path.join(project, ".opencode", "plugins");
    mkdirSync(plugins, { recursive: true });
    writeFileSync(path.join(plugins, "opencode-teams.ts"), PLUGIN_FILE_TEXT);
    expect(checkPluginConfigured(project, env)).toMatchObject({
      level: "ok",
      detail: expect.stringContaining("opencode-teams.ts"),
    });
    const missing = await checkPluginLoads(project, env);
    expect(missing).toMatchObject({ level: "fail", fix: expect.stringContaining("npm install") });
    expect(missing.detail).toContain("no node_modules/opencode-teams");
    mkdirSync(path.join(project, "node_modules"));
    symlinkSync(REPO, path.join(project, "node_modules", "opencode-teams"));
    const check = await checkPluginLoads(project, env);
    expect(check).toMatchObject({ level: "ok" });
    expect(check.detail).toMatch(/: \d+ tools$/);
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

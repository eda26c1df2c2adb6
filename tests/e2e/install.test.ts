/**
 * The plugin as a user meets it: `npm pack` makes the tarball, a local registry on 127.0.0.1 publishes it (and the
 * dependencies, from this repository's node_modules), `npm install opencode-teams` puts it in a fresh project, the
 * installed bin runs `init` (with no Bun on PATH), and a real `opencode serve` installs the plugin by the name init
 * wrote - through OpenCode's own npm install into its cache dir - loads it, lists every tool, and runs a
 * create-team / spawn-agent round with the installed copy. No network: npm and OpenCode are pointed at the registry.
 * Then the same tarball installed by path, as a user does before the package is published (second describe).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import type { PluginInput } from "@opencode-ai/plugin";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { basicAuthHeaders } from "../../src/edges/opencode-client.ts";
import { processCommandLine, terminateProcess } from "../../src/edges/process-info.ts";
import { recordedCredentials } from "../../src/edges/server-auth.ts";
import OpencodeTeamsPlugin from "../../src/index.ts";
import { StoragePaths } from "../../src/state/paths.ts";
import { ServerInfoSchema } from "../../src/state/schemas.ts";
import {
  type MockModel,
  mockProviderConfig,
  OPENCODE_BIN,
  type OpencodeServer,
  REPO_ROOT,
  startMockModel,
  startOpencode,
  type ToolResultInfo,
  waitFor,
} from "./harness/index.ts";
import { type LocalRegistry, startLocalRegistry } from "./harness/local-registry.ts";

const pkg: { name: string; version: string } = JSON.parse(
  readFileSync(path.join(REPO_ROOT, "package.json"), "utf8"),
);
const scratch = realpathSync(mkdtempSync(path.join(os.tmpdir(), "oct-install-")));
const project = path.join(scratch, "project");
const tmuxTmp = path.join(scratch, "tmux");
/** A PATH with node, git, tmux and OpenCode but no Bun: what a user of the npm package may well have. */
const userBin = path.join(scratch, "bin");

let registry: LocalRegistry;
let mock: MockModel;
let server: OpencodeServer;
let tarball: string;

/** Run a command to the end without blocking this process (the local registry answers from it). */
async function run(cmd: string, args: string[], cwd: string, env: Record<string, string>): Promise<string> {
  const child = Bun.spawn([cmd, ...args], { cwd, env, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const timer = setTimeout(() => child.kill(), 100_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${code}):\n${stdout}\n${stderr}`);
  return stdout;
}

/** npm with a private HOME and cache, reading packages from the local registry only. */
function npmEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^npm_/i.test(k)) env[k] = v;
  return {
    ...env,
    HOME: path.join(scratch, "home"),
    PATH: `${userBin}:${path.dirname(process.execPath)}:/usr/bin:/bin`,
    npm_config_registry: registry.url,
    npm_config_cache: path.join(scratch, "npm-cache"),
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
  };
}

function linkUserBin(): void {
  mkdirSync(userBin, { recursive: true });
  symlinkSync(OPENCODE_BIN, path.join(userBin, "opencode"));
  for (const tool of ["node", "npm", "npx"]) {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
    if (found && !existsSync(path.join(userBin, tool))) symlinkSync(found, path.join(userBin, tool));
  }
}

/** The tool names the plugin registers, read from the plugin itself against a throwaway directory. */
async function pluginToolNames(): Promise<string[]> {
  const dir = mkdtempSync(path.join(scratch, "names-"));
  const stub = {
    client: createOpencodeClient({ baseUrl: "http://127.0.0.1:9" }),
    project: { id: "global", worktree: "/", time: { created: Date.now() } },
    directory: dir,
    worktree: "/",
    serverUrl: new URL("http://127.0.0.1:9"),
    $: Bun.$,
  } as unknown as PluginInput;
  const hooks = await OpencodeTeamsPlugin(stub, { background: false });
  await hooks.dispose?.();
  return Object.keys(hooks.tool ?? {});
}

function parsed<T>(result: ToolResultInfo | undefined): T {
  if (!result) throw new Error("the model's tool call left no result: the tool is not registered");
  if (result.status !== "completed") throw new Error(`tool ${result.tool} ${result.status}: ${result.error}`);
  return JSON.parse(result.output ?? "null") as T;
}

async function callTool<T>(sessionId: string, tool: string, args: unknown): Promise<T> {
  await server.promptAndWait(sessionId, `@@call ${tool} ${JSON.stringify(args)}`, { timeoutMs: 120_000 });
  return parsed<T>((await server.toolResults(sessionId, tool)).at(-1));
}

beforeAll(async () => {
  const packDir = path.join(scratch, "pack");
  mkdirSync(packDir, { recursive: true });
  const packed = await run("npm", ["pack", "--silent", "--pack-destination", packDir], REPO_ROOT, {
    ...(process.env as Record<string, string>),
    npm_config_ignore_scripts: "true",
  });
  tarball = path.join(packDir, packed.trim().split("\n").at(-1) ?? "");
  registry = startLocalRegistry([tarball]);
  linkUserBin();
  mkdirSync(project, { recursive: true });
  await run("git", ["init", "-q"], project, npmEnv());
  // The user's own config, with a comment, before init: init must add the plugin and keep the rest.
  const config = JSON.stringify(mockProviderConfig(), null, 2).replace("{", "{\n  // the project's model");
  writeFileSync(path.join(project, "opencode.jsonc"), `${config}\n`);
  writeFileSync(path.join(project, "package.json"), '{ "name": "user-project", "private": true }\n');
  await run("npm", ["install", "--save-dev", pkg.name], project, npmEnv());
  mock = await startMockModel();
}, 120_000);

afterAll(async () => {
  const info = path.join(project, ".opencode", "opencode-teams");
  const serverInfo = new StoragePaths(info).serverInfo(project);
  if (existsSync(serverInfo)) {
    const { pid } = ServerInfoSchema.parse(JSON.parse(readFileSync(serverInfo, "utf8")));
    if ((await processCommandLine(pid))?.includes("serve")) await terminateProcess(pid, 2_000);
  }
  spawnSync("tmux", ["kill-server"], { env: { ...process.env, TMUX_TMPDIR: tmuxTmp }, stdio: "ignore" });
  await server?.stop();
  await mock?.stop();
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe("installed from the packed tarball by name", () => {
  test("the tarball holds the entry, the bin launcher, src, specs and README, and no tests", () => {
    const files = spawnSync("tar", ["-tzf", tarball], { encoding: "utf8" }).stdout.trim().split("\n");
    expect(files).toContain("package/src/index.ts");
    expect(files).toContain("package/bin/opencode-teams.mjs");
    expect(files).toContain("package/README.md");
    expect(files.some((f) => f.startsWith("package/specs/"))).toBe(true);
    const outside = files.filter(
      (f) => !/^package\/(src|specs|bin)\/|^package\/(README\.md|package\.json)$/.test(f),
    );
    expect(outside).toEqual([]);
  });

  test("the installed bin runs init without Bun: the plugin goes into opencode.jsonc, the comment stays", async () => {
    expect(spawnSync("sh", ["-c", "command -v bun"], { env: npmEnv() }).status).not.toBe(0);
    const out = await run("npx", ["--no-install", "opencode-teams", "init", "--no-color"], project, npmEnv());
    expect(out).toContain(`added ${pkg.name}@${pkg.version} to ${path.join(project, "opencode.jsonc")}`);
    expect(out).toContain("ignored by git");
    expect(out).toContain("next: 1.");
    const text = readFileSync(path.join(project, "opencode.jsonc"), "utf8");
    expect(text).toContain("// the project's model");
    expect(text).toContain(`"${pkg.name}@${pkg.version}"`);
  }, 60_000);

  test("opencode serve installs it from the registry into its cache and registers every tool", async () => {
    server = await startOpencode({
      mockBaseUrl: mock.baseUrl,
      projectDir: project,
      writeConfig: false,
      env: {
        npm_config_registry: registry.url,
        PATH: npmEnv().PATH ?? "",
        TMUX_TMPDIR: tmuxTmp,
        OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN,
      },
    });
    const names = await pluginToolNames();
    expect(names).toEqual(expect.arrayContaining(["create-team", "spawn-agent", "heartbeat"]));
    // Throws with the server log when the plugin did not load (OpenCode drops a failed plugin silently).
    const ids = await server.waitForToolIds(names, { timeoutMs: 60_000 });
    expect(ids).toEqual(expect.arrayContaining(names));
    const installed = path.join(
      server.env.XDG_CACHE_HOME,
      "opencode",
      "packages",
      `${pkg.name}@${pkg.version}`,
      "node_modules",
      pkg.name,
    );
    expect(existsSync(path.join(installed, "src", "index.ts"))).toBe(true);
    expect(registry.tarballs).toContain(`${pkg.name}@${pkg.version}`);
    // doctor, from the installed bin, finds that copy through the config and sees it register the tools.
    const doctor = await run("npx", ["--no-install", "opencode-teams", "doctor", "--json"], project, {
      ...npmEnv(),
      XDG_CONFIG_HOME: server.env.XDG_CONFIG_HOME,
      XDG_CACHE_HOME: server.env.XDG_CACHE_HOME,
    }).catch((error: Error) => error.message);
    expect(doctor).toContain('"name": "plugin loads",\n      "level": "ok"');
  }, 180_000);

  test("a create-team / spawn-agent round runs through the installed copy", async () => {
    const leader = await server.createSession("leader");
    expect(await callTool(leader, "create-team", { teamName: "alpha" })).toMatchObject({ success: true });
    const spawned = await callTool<{ success: boolean; sessionId: string; port: number }>(
      leader,
      "spawn-agent",
      {
        teamName: "alpha",
        name: "w1",
        prompt: "@@say ready",
      },
    );
    expect(spawned).toMatchObject({ success: true, status: "active" });
    // The worker's session lives on the project server the installed plugin started, behind the password it recorded.
    const url = `http://127.0.0.1:${spawned.port}`;
    const recorded = ServerInfoSchema.parse(
      JSON.parse(
        readFileSync(
          new StoragePaths(path.join(project, ".opencode", "opencode-teams")).serverInfo(project),
          "utf8",
        ),
      ),
    );
    const headers = basicAuthHeaders(recordedCredentials(recorded) ?? {});
    expect(headers.Authorization).toBeDefined();
    await waitFor(
      async () => {
        const res = await fetch(
          `${url}/session/${spawned.sessionId}/message?directory=${encodeURIComponent(project)}`,
          { headers },
        );
        const messages = (await res.json()) as { info: { role: string } }[];
        return messages.some((m) => m.info.role === "assistant");
      },
      { timeoutMs: 60_000, message: "the worker's first answer" },
    );
  }, 300_000);
});

/**
 * The way to install before the package is published: `npm pack` in a clone, the tarball copied into the project and
 * installed by path (`file:`), then `init`. OpenCode cannot fetch that by name, so init writes the project plugin file
 * that re-exports the installed copy; a copy of the project on another path (its node_modules its own, the original's
 * gone) loads it as well: nothing in the committed files names a path of this machine.
 */
describe("installed from the packed tarball by path", () => {
  const tarProject = path.join(scratch, "tar-project");
  const clone = path.join(scratch, "elsewhere", "deeper", "clone");
  const pluginFile = (root: string) => path.join(root, ".opencode", "plugins", `${pkg.name}.ts`);

  async function serveAndList(root: string): Promise<string[]> {
    await server?.stop();
    server = await startOpencode({
      mockBaseUrl: mock.baseUrl,
      projectDir: root,
      writeConfig: false,
      env: { PATH: npmEnv().PATH ?? "", TMUX_TMPDIR: tmuxTmp, OPENCODE_TEAMS_OPENCODE_BIN: OPENCODE_BIN },
    });
    const names = await pluginToolNames();
    return server.waitForToolIds(names, { timeoutMs: 60_000 });
  }

  beforeAll(async () => {
    mkdirSync(tarProject, { recursive: true });
    await run("git", ["init", "-q"], tarProject, npmEnv());
    writeFileSync(
      path.join(tarProject, "opencode.json"),
      `${JSON.stringify(mockProviderConfig(), null, 2)}\n`,
    );
    writeFileSync(path.join(tarProject, "package.json"), '{ "name": "tar-project", "private": true }\n');
    copyFileSync(tarball, path.join(tarProject, path.basename(tarball)));
    await run("npm", ["install", "--save-dev", `./${path.basename(tarball)}`], tarProject, npmEnv());
  }, 120_000);

  test("init writes the project plugin file, not a name OpenCode would fetch; the config stays as it was", async () => {
    const declared = JSON.parse(readFileSync(path.join(tarProject, "package.json"), "utf8")).devDependencies;
    expect(declared[pkg.name]).toBe(`file:${path.basename(tarball)}`);
    const before = readFileSync(path.join(tarProject, "opencode.json"), "utf8");
    const out = await run(
      "npx",
      ["--no-install", "opencode-teams", "init", "--no-color"],
      tarProject,
      npmEnv(),
    );
    expect(out).toContain(`created ${pluginFile(tarProject)}`);
    expect(out).toMatch(/✓ plugin loads: .*: \d+ tools/);
    expect(readFileSync(path.join(tarProject, "opencode.json"), "utf8")).toBe(before);
    const text = readFileSync(pluginFile(tarProject), "utf8");
    expect(text).toContain(`export { default } from "${pkg.name}";`);
    expect(text).not.toContain(scratch);
  }, 60_000);

  test("opencode serve loads the installed copy and registers every tool, without asking a registry", async () => {
    const asked = registry.packuments.length;
    const names = await pluginToolNames();
    expect(await serveAndList(tarProject)).toEqual(expect.arrayContaining(names));
    // Nothing fetched by name, no cache folder: the copy in node_modules is the one that loaded.
    expect(registry.packuments.slice(asked)).not.toContain(pkg.name);
    expect(
      existsSync(path.join(server.env.XDG_CACHE_HOME, "opencode", "packages", `${pkg.name}@${pkg.version}`)),
    ).toBe(false);
    // OpenCode's own install in .opencode left the plugin file alone, and git would commit it.
    expect(readFileSync(pluginFile(tarProject), "utf8")).toContain(`from "${pkg.name}"`);
    const ignored = spawnSync("git", ["-C", tarProject, "check-ignore", "-q", pluginFile(tarProject)]);
    expect(ignored.status).toBe(1);
  }, 180_000);

  test("a copy of the project on another path loads its own copy; the original's node_modules is gone", async () => {
    await server?.stop();
    mkdirSync(path.dirname(clone), { recursive: true });
    cpSync(tarProject, clone, { recursive: true, verbatimSymlinks: true });
    rmSync(path.join(tarProject, "node_modules"), { recursive: true, force: true });
    const names = await pluginToolNames();
    expect(await serveAndList(clone)).toEqual(expect.arrayContaining(names));
    const doctor = await run(
      "npx",
      ["--no-install", "opencode-teams", "doctor", "--json"],
      clone,
      npmEnv(),
    ).catch((error: Error) => error.message);
    expect(doctor).toContain('"name": "plugin loads",\n      "level": "ok"');
    expect(doctor).toContain(path.join(clone, "node_modules", pkg.name));
  }, 180_000);
});

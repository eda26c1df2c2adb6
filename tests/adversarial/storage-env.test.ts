/**
 * Agents resolve the leader's storage whatever their directory. OpenCode loads the plugin once per directory inside
 * the project server, so an agent working in a nested repository (or another worktree) gets a plugin instance whose
 * worktree is that repository; the server we start carries the leader's project root and storage dir in its
 * environment, and every plugin instance in it uses them. The leader's own OpenCode, not started by us, does not.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { outsideServerEnv } from "../../src/edges/server-env.ts";
import { processEnvironment } from "../../src/edges/server-identity.ts";
import { spawnAgent } from "../../src/operations/agents/spawn.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { resolveProjectRoot } from "../../src/project-root.ts";
import { resolveStorageRoot } from "../../src/state/paths.ts";
import { type MockModel, type OpencodeServer, startMockModel, startOpencode } from "../e2e/harness/index.ts";
import { fakeServeKit } from "../helpers/fake-serve.ts";
import { basicAuth, heartbeatResult, heartbeatScript, leaderOnRealServer } from "../helpers/real-server.ts";

const kit = fakeServeKit("oct-envstore-");
afterEach(() => kit.stopAll());
afterAll(() => kit.remove());

describe("the server carries the leader's project root and storage", () => {
  test("a started server has both in its environment; this process's environment is untouched", async () => {
    const { dir, paths } = kit.project("markers");
    const server = kit.track(await kit.manager(dir, paths).ensureRunning());
    const env = await processEnvironment(server.info.pid);
    expect(env?.OPENCODE_TEAMS_PROJECT_ROOT).toBe(dir);
    expect(env?.OPENCODE_TEAMS_DIR).toBe(paths.root);
    expect(process.env.OPENCODE_TEAMS_PROJECT_ROOT).toBeUndefined();
  });

  test("a plugin instance for a nested repository resolves the leader's root inside the server, its own outside", () => {
    const leader = "/work/project";
    const input = { worktree: "/work/project/vendor/lib", directory: "/work/project/vendor/lib/src" };
    const inServer = {
      OPENCODE_TEAMS_PROJECT_ROOT: leader,
      OPENCODE_TEAMS_DIR: `${leader}/.opencode/opencode-teams`,
    };
    const root = resolveProjectRoot(input, () => false, inServer);
    expect(root).toBe(leader);
    expect(resolveStorageRoot(root, inServer)).toBe(`${leader}/.opencode/opencode-teams`);
    // The leader's own OpenCode has neither variable: it resolves as before.
    expect(resolveProjectRoot(input, () => false, {})).toBe("/work/project/vendor/lib");
  });
});

describe("nothing the plugin starts from inside the server inherits the server's markers", () => {
  test("tmux (which may outlive the server and serve the user's shells) gets an environment without them", () => {
    const inServer = {
      PATH: "/bin",
      OPENCODE_TEAMS_SERVER_AUTH: "generated",
      OPENCODE_SERVER_PASSWORD: "generated-secret",
      OPENCODE_SERVER_USERNAME: "opencode",
      OPENCODE_TEAMS_PROJECT_ROOT: "/work/project",
      OPENCODE_TEAMS_DIR: "/work/project/.opencode/opencode-teams",
    };
    expect(outsideServerEnv(inServer)).toEqual({ PATH: "/bin" });
    // The user's own password stays theirs; outside our server nothing changes.
    const userPassword = { ...inServer, OPENCODE_TEAMS_SERVER_AUTH: "environment" };
    expect(outsideServerEnv(userPassword)).toEqual({
      PATH: "/bin",
      OPENCODE_SERVER_PASSWORD: "generated-secret",
      OPENCODE_SERVER_USERNAME: "opencode",
    });
    const leader = { PATH: "/bin", OPENCODE_TEAMS_DIR: "/mine", OPENCODE_SERVER_PASSWORD: "mine" };
    expect(outsideServerEnv(leader)).toEqual(leader);
  });
});

describe("real server", () => {
  let mock: MockModel | undefined;
  let main: OpencodeServer | undefined;
  let projectServerPid: number | undefined;
  afterAll(async () => {
    if (projectServerPid !== undefined) await kit.stopAll();
    await main?.stop();
    await mock?.stop();
  }, 30_000);

  test("an agent working in a nested git repository heartbeats into the leader's storage", async () => {
    mock = await startMockModel();
    main = await startOpencode({
      mockBaseUrl: mock.baseUrl,
      gitInit: true,
      pluginOptions: { background: false },
    });
    // A nested repository with its own OpenCode config (the same plugin), as a vendored repo would have.
    const nested = path.join(main.projectDir, "vendor", "lib");
    mkdirSync(nested, { recursive: true });
    expect(spawnSync("git", ["init", "-q", nested]).status).toBe(0);
    copyFileSync(path.join(main.projectDir, "opencode.json"), path.join(nested, "opencode.json"));

    const env = { ...process.env, ...main.env };
    const { ctx, servers } = leaderOnRealServer(main, { allowCwdOutsideProject: true }, env);
    ctx.edges.ensureProjectServer = async () => kit.track(await servers.ensureRunning());

    expect((await createTeam(ctx, { teamName: "nest" }, "ses_nest_leader")).success).toBe(true);
    const spawned = await spawnAgent(
      ctx,
      { teamName: "nest", prompt: heartbeatScript("nest"), cwd: nested, headless: true },
      "ses_nest_leader",
    );
    if (!spawned.success) throw new Error(spawned.error);
    const { sessionId, agentId } = spawned;
    const server = await servers.current();
    if (!server) throw new Error("no project server");
    projectServerPid = server.info.pid;

    // The heartbeat call once it has finished, whichever way: its result says where it looked.
    const auth = basicAuth(server.credentials);
    const finished = await heartbeatResult(server.url, sessionId, nested, auth, 45_000);
    expect(finished).toStartWith("{");
    expect(JSON.parse(finished)).toMatchObject({ success: true });
    // It landed in the leader's storage, and nothing was made in the nested repository.
    expect((await ctx.store.readHeartbeat("nest", agentId)).record?.source).toBe("tool");
    expect(existsSync(path.join(nested, ".opencode", "opencode-teams"))).toBe(false);
  }, 150_000);
});

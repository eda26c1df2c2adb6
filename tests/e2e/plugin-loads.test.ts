/**
 * Smoke test: the real plugin (src/index.ts) loads in a real `opencode serve`, and a session driven by the mock model
 * calls one of its tools end to end.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { PluginInput } from "@opencode-ai/plugin";
import { createOpencodeClient } from "@opencode-ai/sdk";
import OpencodeTeamsPlugin from "../../src/index.ts";
import { tmux, useOpencode } from "./harness/index.ts";

const BRIEFED_TOOLS = ["create-team", "create-task", "update-task", "list-tasks"];

/** The tool names the plugin registers, read from the plugin itself (initialised against a throwaway directory). */
async function pluginToolNames(tmuxSocket: string): Promise<string[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oc-e2e-names-"));
  try {
    const stub = {
      client: createOpencodeClient({ baseUrl: "http://127.0.0.1:9" }),
      project: { id: "global", worktree: "/", time: { created: Date.now() } },
      directory: dir,
      worktree: "/",
      experimental_workspace: { register: () => undefined },
      serverUrl: new URL("http://127.0.0.1:9"),
      $: Bun.$,
    } as unknown as PluginInput;
    const hooks = await OpencodeTeamsPlugin(stub, { background: false, tmuxSocket });
    await hooks.dispose?.();
    return Object.keys(hooks.tool ?? {});
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("plugin loads in a real opencode serve", () => {
  const socket = tmux.tmuxSocketName();
  // No project server in the background after create-team: nothing here spawns, and the SIGKILL below would leave it
  // running with nobody to stop it.
  const fx = useOpencode({ pluginOptions: { tmuxSocket: socket, prewarmServer: false } });
  afterAll(() => tmux.killServer(socket));

  test("server started hermetically and quickly", () => {
    console.error(
      `[e2e] opencode serve healthy in ${fx.server.startupMs} ms (pid ${fx.server.pid}, ${fx.server.url})`,
    );
    expect(fx.server.env.HOME.startsWith(fx.server.rootDir)).toBe(true);
    expect(fx.server.env.XDG_CONFIG_HOME.startsWith(fx.server.rootDir)).toBe(true);
    // Well under the ~10-60 s a registry install of @opencode-ai/plugin would take.
    expect(fx.server.startupMs).toBeLessThan(30_000);
  }, 10_000);

  test("GET /experimental/tool/ids lists the plugin's tools", async () => {
    const names = await pluginToolNames(socket);
    expect(names).toEqual(expect.arrayContaining(BRIEFED_TOOLS));
    const t0 = Date.now();
    const ids = await fx.server.waitForToolIds(names, { timeoutMs: 30_000 });
    console.error(`[e2e] plugin tools visible ${Date.now() - t0} ms after the first directory request`);
    expect(ids).toEqual(expect.arrayContaining(names));
    // The config-dir installs were pre-satisfied: OpenCode did not run npm (which rewrites the lock with every package).
    for (const dir of [
      path.join(fx.server.projectDir, ".opencode"),
      path.join(fx.server.env.XDG_CONFIG_HOME, "opencode"),
    ]) {
      const lock: { packages: Record<string, unknown> } = JSON.parse(
        readFileSync(path.join(dir, "package-lock.json"), "utf8"),
      );
      expect(Object.keys(lock.packages)).toEqual([""]);
    }
  }, 60_000);

  test("a session calls create-team through the mock model", async () => {
    const { server, mock } = fx;
    const sessionId = await server.createSession("smoke leader");
    await server.promptAndWait(sessionId, '@@call create-team {"teamName":"alpha"}', { timeoutMs: 60_000 });

    const results = await server.toolResults(sessionId, "create-team");
    expect(results).toHaveLength(1);
    const [result] = results;
    expect(result?.status).toBe("completed");
    expect(result?.input).toEqual({ teamName: "alpha" });
    const output: unknown = JSON.parse(result?.output ?? "null");
    expect(output).toMatchObject({ success: true, teamName: "alpha" });

    const config = path.join(
      server.projectDir,
      ".opencode",
      "opencode-teams",
      "teams",
      "alpha",
      "config.json",
    );
    expect(existsSync(config)).toBe(true);

    // The mock reports the last tool result back as text, and it saw the plugin's tools in the request.
    expect(await server.lastAssistantText(sessionId)).toStartWith("DONE create-team: ");
    const modelRequests = mock.requests.filter((r) => r.sessionId === sessionId && !r.isTitleRequest);
    expect(modelRequests.length).toBe(2);
    expect(modelRequests[0]?.tools).toContain("create-team");
    expect(modelRequests[0]?.system.length).toBeGreaterThan(0);
  }, 90_000);

  test("restart after SIGKILL keeps port, dirs and sessions", async () => {
    const { server } = fx;
    const { port, projectDir } = server;
    const oldPid = server.pid;
    const before = (await server.client.session.list()).data?.length ?? 0;
    server.kill("SIGKILL");
    await server.waitForExit();
    expect(server.isRunning()).toBe(false);
    await server.restart();
    console.error(`[e2e] restart healthy in ${server.startupMs} ms`);
    expect(server.pid).not.toBe(oldPid);
    expect(server.port).toBe(port);
    expect(server.projectDir).toBe(projectDir);
    expect((await server.client.session.list()).data?.length ?? 0).toBe(before);
    await server.waitForToolIds(["create-team"]);
  }, 90_000);
});

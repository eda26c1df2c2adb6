import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_PANE_TIMING } from "../../src/operations/agents/agent-pane.ts";
import { COLOR_PALETTE } from "../../src/operations/agents/color-pool.ts";
import { paneChecksSettled } from "../../src/operations/agents/pane-start-check.ts";
import { type SpawnAgentOutput, spawnAgent } from "../../src/operations/agents/spawn.ts";
import { parseAgentSessionTitle } from "../../src/operations/team/identity-prompt.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { ColorPoolSchema } from "../../src/state/color-store.ts";
import { type AgentState, ServerInfoSchema } from "../../src/state/schemas.ts";
import { readJson } from "../../src/state/store.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { recordServerInfo } from "../helpers/server-info.ts";
import { agentOnDisk, leaderInbox, mockModelTeamContext } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

const LEADER = "ses_leader";

type SpawnResult = SpawnAgentOutput & { success: boolean; error?: string };

let ctx: TestContext;
let call: ToolCall;

// The color tests run more agents at once than the default maxAgents.
beforeEach(
  async () => ({ ctx, call } = await mockModelTeamContext(LEADER, { promptRetryDelayMs: 0, maxAgents: 50 })),
);

afterEach(() => ctx.cleanup());

const spawn = (args: Record<string, unknown>, session = LEADER) =>
  call<SpawnResult>("spawn-agent", { teamName: "alpha", prompt: "Build the thing", ...args }, session);

async function members(team = "alpha") {
  const read = await ctx.store.readTeam(team);
  return read.kind === "ok" ? read.value.members : [];
}

async function activeColors() {
  const pool = await readJson(ctx.store.paths.colorPool, ColorPoolSchema);
  return pool.kind === "ok" ? pool.value.assignments.filter((a) => !a.releasedAt) : [];
}

/** The background check of the spawn's pane, once the manual clock has passed its settle time. */
async function paneChecked() {
  ctx.clock.advance(DEFAULT_PANE_TIMING.settleMs);
  await paneChecksSettled(ctx);
}

/** Nothing of a failed spawn may remain: no member besides the leader, no agent file, no color, no session, no pane. */
async function expectNoGhost() {
  expect((await members()).map((m) => m.role)).toEqual(["leader"]);
  const { items } = await ctx.store.listAgentViews("alpha");
  expect(items.map((v) => v.state.role)).toEqual(["leader"]);
  expect(await activeColors()).toEqual([]);
  expect(ctx.server.sessions.size).toBe(0);
  expect([...ctx.tmux.panes.values()].filter((p) => p.alive)).toEqual([]);
}

describe("spawn-agent: the flow", () => {
  test("session, color, pane, state, member, prompt, active", async () => {
    const steps: string[] = [];
    const result = await spawnAgent(
      ctx,
      { teamName: "alpha", prompt: "Build the thing", name: "builder" },
      LEADER,
      (step) => steps.push(step),
    );
    if (!result.success) throw new Error(result.error);
    expect(result).toMatchObject({ name: "builder", status: "active", promptDelivery: "sdk", port: 28001 });
    expect(result.warnings).toBeUndefined();
    expect(steps).toEqual([
      "Starting the OpenCode server",
      "Creating the session for builder",
      "Delivering the prompt to builder",
      "Opening a tmux pane for builder",
    ]);

    const session = ctx.server.sessions.get(result.sessionId);
    expect(parseAgentSessionTitle(session?.title ?? "")).toEqual({
      teamName: "alpha",
      name: "builder",
      agentId: result.agentId,
    });
    expect(session?.title).toBe(`teams::alpha::builder::${result.agentId}`);
    expect(session?.directory).toBe(ctx.projectRoot);
    expect(session?.prompts).toEqual([
      { text: "Build the thing", model: { providerID: "mock", modelID: "mock-model" } },
    ]);

    const pane = ctx.tmux.panes.get(result.paneId ?? "");
    expect(pane?.spec).toMatchObject({
      session: "teams-alpha",
      window: "team-alpha",
      cwd: ctx.projectRoot,
      command: [
        "opencode",
        "attach",
        ctx.server.baseUrl,
        "--session",
        result.sessionId,
        "--dir",
        ctx.projectRoot,
      ],
      layout: "tiled",
      options: {
        opencode_session_id: result.sessionId,
        agent_id: result.agentId,
        agent_name: "builder",
        agent_color: result.color,
      },
    });
    expect(pane?.spec.env).toEqual({});

    const state = await agentOnDisk(ctx, { agentId: result.agentId });
    expect(state).toMatchObject({
      status: "active",
      role: "worker",
      model: "mock/mock-model",
      providerId: "mock",
      sessionId: result.sessionId,
      paneId: result.paneId,
      attachPid: pane?.panePid,
      tmux: { session: "teams-alpha", window: "team-alpha" },
      color: result.color,
      prompt: "Build the thing",
      headless: false,
      heartbeatSource: "spawn",
    });
    expect((await members()).map((m) => m.name)).toEqual(["leader", "builder"]);
    expect((await ctx.store.readHeartbeat("alpha", result.agentId)).record?.source).toBe("spawn");
    expect((await activeColors()).map((a) => a.agentId)).toEqual([result.agentId]);
    const history = JSON.parse(await readFile(ctx.store.paths.history("alpha"), "utf8")) as {
      entries: { agent_id: string; status: string }[];
    };
    expect(history.entries).toEqual([
      expect.objectContaining({ agent_id: result.agentId, status: "spawned" }),
    ]);
  });

  test("the server's password reaches the pane through its environment, not its command", async () => {
    ctx.serverCredentials = { username: "opencode", password: "hunter2" };
    const result = await spawn({});
    const pane = ctx.tmux.panes.get(result.paneId ?? "");
    expect(pane?.spec.env).toEqual({
      OPENCODE_SERVER_PASSWORD: "hunter2",
      OPENCODE_SERVER_USERNAME: "opencode",
    });
    expect(pane?.spec.command.join(" ")).not.toContain("hunter2");
  });

  test("headless: no pane, no tmux needed, paneId absent", async () => {
    ctx.tmux.installed = false;
    const result = await spawn({ headless: true });
    expect(result.success).toBe(true);
    expect("paneId" in result).toBe(false);
    const state = await agentOnDisk(ctx, { agentId: result.agentId });
    expect(state?.headless).toBe(true);
    expect(state?.paneId).toBeUndefined();
    expect(ctx.tmux.panes.size).toBe(0);
  });

  test("inside the user's tmux the team window goes into the user's session; a private socket wins", async () => {
    ctx.tmux.insideSession = "my work";
    const inside = await spawn({});
    expect(ctx.tmux.panes.get(inside.paneId ?? "")?.spec).toMatchObject({
      session: "my work",
      window: "team-alpha",
    });
    // With the identity of the tmux server the pane opened on: pane ids start over when that server restarts.
    expect((await agentOnDisk(ctx, { agentId: inside.agentId })).tmux).toEqual({
      session: "my work",
      window: "team-alpha",
      server: ctx.tmux.server,
    });

    const isolated = await makeTestContext({ promptRetryDelayMs: 0, tmuxSocket: "oct-test" });
    try {
      isolated.tmux.insideSession = "my work";
      await createTeam(isolated, { teamName: "alpha" }, LEADER);
      const result = await spawnAgent(isolated, { teamName: "alpha", prompt: "x" }, LEADER);
      if (!result.success) throw new Error(result.error);
      expect(isolated.tmux.panes.get(result.paneId ?? "")?.spec).toMatchObject({
        socket: "oct-test",
        session: "teams-alpha",
        window: "team-alpha",
      });
    } finally {
      await isolated.cleanup();
    }
  });

  test("model: provider/model, providerId + model id, team default, server default", async () => {
    const a = await spawn({ model: "anthropic/claude-sonnet-4-5" });
    expect(ctx.server.sessions.get(a.sessionId)?.prompts[0]?.model).toEqual({
      providerID: "anthropic",
      modelID: "claude-sonnet-4-5",
    });
    const b = await spawn({ model: "anthropic/claude-3.5", providerId: "openrouter" });
    expect(ctx.server.sessions.get(b.sessionId)?.prompts[0]?.model).toEqual({
      providerID: "openrouter",
      modelID: "anthropic/claude-3.5",
    });
    expect((await agentOnDisk(ctx, { agentId: b.agentId })).model).toBe("openrouter/anthropic/claude-3.5");
    const c = await spawn({ model: "claude-x", providerId: "anthropic" });
    expect((await agentOnDisk(ctx, { agentId: c.agentId })).model).toBe("anthropic/claude-x");

    await createTeam(ctx, { teamName: "plain" }, "ses_other_leader");
    const d = await call<SpawnResult>("spawn-agent", { teamName: "plain", prompt: "x" }, "ses_other_leader");
    expect(ctx.server.sessions.get(d.sessionId)?.prompts[0]?.model).toBeUndefined();
    expect((await agentOnDisk(ctx, { agentId: d.agentId, teamName: "plain" })).model).toBe("default");
  });

  test("bad model arguments are refused before anything happens", async () => {
    expect((await spawn({ model: "claude-without-provider" })).error).toMatch(
      /^Invalid model 'claude-without-provider'/,
    );
    expect((await spawn({ providerId: "anthropic" })).error).toMatch(/^providerId 'anthropic' needs a model/);
    // The warm-up's stand-in is listed among the project server's models, but nothing answers there after it.
    for (const args of [
      { model: "opencode-teams-warmup/warm-up" },
      { model: "warm-up", providerId: "opencode-teams-warmup" },
    ])
      expect((await spawn(args)).error).toMatch(/is opencode-teams' warm-up stand-in, not a model/);
    const team = await createTeam(
      ctx,
      { teamName: "warm", defaultModel: "opencode-teams-warmup/warm-up" },
      "ses_warm_leader",
    ).catch((error: unknown) => error);
    expect(String(team)).toMatch(
      /defaultModel 'opencode-teams-warmup\/\.\.\.' is opencode-teams' warm-up stand-in/,
    );
    expect(ctx.serverEnsureCalls).toBe(0);
    await expectNoGhost();
  });

  test("names: auto-generated per role and unique, given names kept; cwd resolved; timeoutMinutes stored", async () => {
    await mkdir(path.join(ctx.projectRoot, "sub dir"));
    const a = await spawn({ cwd: "sub dir", timeoutMinutes: 15 });
    const b = await spawn({ role: "reviewer" });
    const c = await spawn({ name: "worker-2" });
    const d = await spawn({});
    expect([a.name, b.name, c.name, d.name]).toEqual(["worker-1", "reviewer-1", "worker-2", "worker-3"]);
    const state = await agentOnDisk(ctx, { agentId: a.agentId });
    expect(state?.cwd).toBe(path.join(ctx.projectRoot, "sub dir"));
    expect(state?.timeoutMinutes).toBe(15);
    expect(ctx.server.sessions.get(a.sessionId)?.directory).toBe(path.join(ctx.projectRoot, "sub dir"));
    expect((await spawn({ cwd: "nope" })).error).toBe(
      `Working directory '${path.join(ctx.projectRoot, "nope")}' does not exist`,
    );
    expect((await spawn({ name: "bad\nname" })).error).toMatch(/^Invalid agent name/);
  });

  test("ServerInfo.activeSessions counts the running agents", async () => {
    const info = ctx.store.paths.serverInfo(ctx.projectRoot);
    await recordServerInfo(ctx, 28001);
    await spawn({});
    await spawn({ headless: true });
    const read = await readJson(info, ServerInfoSchema);
    expect(read.kind === "ok" && read.value.activeSessions).toBe(2);
  });

  test("a failed spawn is not left in ServerInfo.activeSessions (the count starts before the pane opens)", async () => {
    const info = ctx.store.paths.serverInfo(ctx.projectRoot);
    await recordServerInfo(ctx, 28001);
    await spawn({});
    // The pane fails only once the count that includes the new agent has been written.
    const counted = async () => {
      const read = await readJson(info, ServerInfoSchema);
      return read.kind === "ok" && read.value.activeSessions === 2;
    };
    ctx.tmux.openPane = async () => {
      for (let tries = 0; tries < 400 && !(await counted()); tries++) await Bun.sleep(5);
      throw new Error("no space for new pane");
    };
    expect((await spawn({})).error).toBe("Failed to create tmux pane: no space for new pane");
    const read = await readJson(info, ServerInfoSchema);
    expect(read.kind === "ok" && read.value.activeSessions).toBe(1);
  });
});

describe("spawn-agent: the spec's error table", () => {
  test("caller is not the leader: a stranger, and a worker of the team", async () => {
    expect((await spawn({}, "ses_stranger")).error).toBe("Only the team leader can spawn agents");
    const worker = await addAgent(ctx, "alpha", { sessionId: "ses_worker" });
    expect((await spawn({}, "ses_worker")).error).toBe("Only the team leader can spawn agents");
    expect(ctx.serverEnsureCalls).toBe(0);
    expect((await members()).map((m) => m.agentId)).toContain(worker.agentId);
  });

  test("team not found", async () => {
    expect((await spawn({ teamName: "nope" })).error).toBe("Team 'nope' does not exist");
  });

  test("tmux not available", async () => {
    ctx.tmux.installed = false;
    expect((await spawn({})).error).toBe("tmux is required for agent spawning");
    expect(ctx.serverEnsureCalls).toBe(0);
    await expectNoGhost();
  });

  test("server failed to start", async () => {
    ctx.serverStartFailure = "opencode exited with code 1 (log: /x/server.log)";
    expect((await spawn({})).error).toBe(
      "Failed to start OpenCode server: opencode exited with code 1 (log: /x/server.log)",
    );
    await expectNoGhost();
  });

  test("session creation failed: nothing remains", async () => {
    ctx.server.createSession = async () => {
      throw new Error("POST /session failed (HTTP 500)");
    };
    expect((await spawn({})).error).toBe("Failed to create SDK session: POST /session failed (HTTP 500)");
    await expectNoGhost();
  });

  test("pane creation failed: the session is deleted, the color released, the member removed", async () => {
    ctx.tmux.failOpen = true;
    expect((await spawn({})).error).toBe(
      "Failed to create tmux pane: tmux split-window failed: no space for new pane",
    );
    expect(ctx.server.calls.some((c) => c.startsWith("deleteSession"))).toBe(true);
    await expectNoGhost();
  });

  test("a pane whose command dies at once: the spawn returns, then the agent ends and the leader is told why", async () => {
    const original = ctx.tmux.openPane.bind(ctx.tmux);
    ctx.tmux.openPane = async (spec) => {
      const opened = await original(spec);
      const pane = ctx.tmux.panes.get(opened.paneId);
      if (pane) pane.alive = false;
      return opened;
    };
    const result = await spawn({ name: "broken" });
    expect(result).toMatchObject({ success: true, status: "active" });
    await paneChecked();
    const agent = await agentOnDisk(ctx, result);
    expect(agent.status).toBe("inactive");
    expect(agent.statusReason).toBe(
      `its tmux pane ${result.paneId} closed as it opened: the pane's command exited right away; is 'opencode' a runnable opencode binary?`,
    );
    const inbox = await leaderInbox(ctx);
    expect(inbox.map((m) => m.type)).toEqual(["agent_inactive"]);
    expect(inbox[0]?.text).toBe(
      `Agent broken (${result.agentId}) became inactive: ${agent.statusReason}. Tasks returned to pending: none.`,
    );
    // The session the server still runs is aborted, as for any agent whose pane died.
    expect(ctx.server.calls).toContain(`abortSession ${result.sessionId}`);
  });

  /** A pane that dies as it opens; `meanwhile` runs when the check asks tmux about it (what happened until then). */
  function dyingPanes(meanwhile: (paneId: string) => Promise<void>) {
    const original = ctx.tmux.openPane.bind(ctx.tmux);
    ctx.tmux.openPane = async (spec) => {
      const opened = await original(spec);
      const pane = ctx.tmux.panes.get(opened.paneId);
      if (pane) pane.alive = false;
      return opened;
    };
    const paneState = ctx.tmux.paneState.bind(ctx.tmux);
    ctx.tmux.paneState = async (ref) => {
      await meanwhile(ref.paneId);
      return paneState(ref);
    };
  }

  /** What the sweep writes for a gone pane, or what complete-agent writes, to the agent on `paneId`. */
  async function agentOnPaneBecomes(paneId: string, change: Partial<AgentState>) {
    const { items } = await ctx.store.listAgentViews("alpha");
    const agent = items.find(({ state }) => state.paneId === paneId)?.state;
    if (agent)
      await ctx.store.updateAgent("alpha", agent.agentId, (s) => (s ? { ...s, ...change } : undefined));
  }

  test("a dying pane the pane watch saw first: the leader still hears why it died", async () => {
    dyingPanes((paneId) =>
      agentOnPaneBecomes(paneId, { status: "inactive", statusReason: `its tmux pane ${paneId} is gone` }),
    );
    const result = await spawn({ name: "broken" });
    await paneChecked();
    const inbox = await leaderInbox(ctx);
    expect(inbox.map((m) => [m.type, m.text])).toEqual([
      [
        "notice",
        `Agent broken (${result.agentId}): its tmux pane ${result.paneId} closed as it opened: the pane's command exited right away; is 'opencode' a runnable opencode binary?.`,
      ],
    ]);
    expect((await agentOnDisk(ctx, result)).statusReason).toBe(`its tmux pane ${result.paneId} is gone`);
  });

  test("a pane closed on purpose while it is checked (the agent completed) is no failure", async () => {
    dyingPanes((paneId) => agentOnPaneBecomes(paneId, { status: "terminated" }));
    const result = await spawn({ name: "quick" });
    await paneChecked();
    expect(await leaderInbox(ctx)).toEqual([]);
    expect((await agentOnDisk(ctx, result)).status).toBe("terminated");
  });

  test("an unexpected failure mid-way (color pool unwritable) is rolled back too", async () => {
    await mkdir(ctx.store.paths.colorPool, { recursive: true });
    const result = await spawn({});
    expect(result.error).toMatch(/^spawn-agent failed: /);
    expect((await members()).map((m) => m.role)).toEqual(["leader"]);
    expect(ctx.server.sessions.size).toBe(0);
  });

  test("the color failing while the session is still being created: no unhandled rejection, nothing left", async () => {
    await mkdir(ctx.store.paths.colorPool, { recursive: true });
    const create = ctx.server.createSession.bind(ctx.server);
    ctx.server.createSession = async (input) => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return create(input);
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const result = await spawn({});
      expect(result.error).toMatch(/^spawn-agent failed: /);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
    // The pool is a directory here: everything but the colors, as expectNoGhost checks it.
    expect((await members()).map((m) => m.role)).toEqual(["leader"]);
    const { items } = await ctx.store.listAgentViews("alpha");
    expect(items.map((v) => v.state.role)).toEqual(["leader"]);
    expect(ctx.server.sessions.size).toBe(0);
    expect([...ctx.tmux.panes.values()].filter((p) => p.alive)).toEqual([]);
  });

  test("the agent file is flushed to disk before the spawn returns; a failed flush fails the spawn and rolls it back", async () => {
    const flushed: string[] = [];
    const flush = ctx.store.flushAgent.bind(ctx.store);
    ctx.store.flushAgent = async (teamName, agentId) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      await flush(teamName, agentId);
      flushed.push(agentId);
    };
    const done = await spawn({});
    expect(done.success).toBe(true);
    expect(flushed).toEqual([done.agentId]);
    await call("kill-agent", { teamName: "alpha", agentId: done.agentId }, LEADER);
    const membersBefore = await members();
    const sessionsBefore = ctx.server.sessions.size;
    ctx.store.flushAgent = async () => {
      throw new Error("EIO: i/o error, fsync");
    };
    const failed = await spawn({});
    expect(failed.error).toMatch(/^spawn-agent failed: .*EIO/);
    const { items } = await ctx.store.listAgentViews("alpha");
    expect(items.filter((v) => v.state.status !== "terminated").map((v) => v.state.role)).toEqual(["leader"]);
    expect(await members()).toEqual(membersBefore);
    expect(ctx.server.sessions.size).toBe(sessionsBefore);
    expect(await activeColors()).toEqual([]);
  });

  test("prompt delivery: retried, 3 attempts", async () => {
    ctx.server.failPrompts = 2;
    const result = await spawn({});
    expect(result).toMatchObject({ success: true, status: "active", promptDelivery: "sdk" });
    expect(ctx.server.sessions.get(result.sessionId)?.prompts).toHaveLength(1);
  });

  test("prompt delivery: after 3 failed attempts the prompt is typed into the pane", async () => {
    ctx.server.failPrompts = 3;
    ctx.tmux.onType = (pane) => {
      const session = ctx.server.sessions.get(pane.spec.options?.opencode_session_id ?? "");
      if (session) session.messages += 1;
    };
    const result = await spawn({});
    expect(result).toMatchObject({ success: true, status: "active", promptDelivery: "pane" });
    expect(ctx.tmux.panes.get(result.paneId ?? "")?.typed).toEqual(["Build the thing"]);
  });

  test("prompt delivery failed everywhere: the agent stays spawning and the response says so", async () => {
    ctx.server.dropPrompts = true;
    const result = await spawn({});
    expect(result).toMatchObject({ success: true, status: "spawning", promptDelivery: "failed" });
    expect(result.warnings?.[0]).toMatch(
      /^The initial prompt could not be delivered \(attempt 1: accepted, but no new message/,
    );
    expect(result.warnings?.[0]).toContain("typing into the pane");
    expect(result.warnings?.[0]).toContain("stays 'spawning'");
    expect(result.title).toContain("prompt NOT delivered");
    expect((await agentOnDisk(ctx, { agentId: result.agentId })).status).toBe("spawning");
    expect(ctx.server.sessions.get(result.sessionId)?.prompts).toHaveLength(3);
  });

  test("prompt delivery failed, headless: no typing fallback", async () => {
    ctx.server.failPrompts = 5;
    const result = await spawn({ headless: true });
    expect(result).toMatchObject({ success: true, status: "spawning", promptDelivery: "failed" });
    expect(result.warnings?.[0]).toContain("attempt 3: prompt_async failed (HTTP 400)");
    expect(result.warnings?.[0]).not.toContain("typing");
  });
});

describe("spawn-agent: the way to the prompt", () => {
  test("the prompt goes out once the agent's file (with its session), member and color are written; their flushes follow", async () => {
    const seen: string[] = [];
    let atPrompt: Record<string, unknown> | undefined;
    const prompt = ctx.server.promptAsync.bind(ctx.server);
    ctx.server.promptAsync = async (sessionId, text, options) => {
      seen.push("prompt sent");
      // What the liveness monitor and the identity hook would find when the session's first event comes.
      const { items } = await ctx.store.listAgentViews("alpha");
      const agent = items.find((view) => view.state.sessionId === sessionId)?.state;
      atPrompt = {
        file: agent?.status,
        member: (await members()).some((m) => m.agentId === agent?.agentId),
        color: (await activeColors()).some((a) => a.agentId === agent?.agentId),
      };
      return prompt(sessionId, text, options);
    };
    const flushTeam = ctx.store.flushTeam.bind(ctx.store);
    ctx.store.flushTeam = async (teamName) => {
      seen.push("team flushed");
      await flushTeam(teamName);
    };
    const flushColors = ctx.store.colors.flush.bind(ctx.store.colors);
    ctx.store.colors.flush = async () => {
      seen.push("colors flushed");
      await flushColors();
    };
    const result = await spawn({ headless: true });
    expect(result).toMatchObject({ success: true, status: "active" });
    expect(atPrompt).toEqual({ file: "spawning", member: true, color: true });
    expect(seen).toEqual(["prompt sent", "team flushed", "colors flushed"]);
  });

  test("a failed flush of the member or the color fails the spawn after its prompt, and rolls it back", async () => {
    ctx.store.flushTeam = async () => {
      throw new Error("EIO: i/o error, fsync");
    };
    const failed = await spawn({});
    expect(failed.error).toMatch(/^spawn-agent failed: .*EIO/);
    expect(ctx.server.calls.some((c) => c.startsWith("promptAsync"))).toBe(true);
    expect(ctx.server.calls.some((c) => c.startsWith("deleteSession"))).toBe(true);
    await expectNoGhost();
  });

  test("a spawn refused for capacity while the server is still looked up is refused at once: no session, no prompt", async () => {
    await ctx.store.updateTeam("alpha", (t) => (t ? { ...t, maxAgents: 1 } : t));
    expect((await spawn({ headless: true })).success).toBe(true);
    const callsBefore = [...ctx.server.calls];
    const ensure = ctx.edges.ensureProjectServer;
    if (!ensure) throw new Error("no ensureProjectServer");
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    ctx.edges.ensureProjectServer = async () => {
      await gate;
      return ensure();
    };
    try {
      const refused = await Promise.race([
        spawn({ headless: true }),
        Bun.sleep(2_000).then(() => ({ success: false, error: "it waited for the server" })),
      ]);
      expect(refused.error).toMatch(/^Team 'alpha' already runs 1 agent, the limit/);
      expect(ctx.server.calls).toEqual(callsBefore);
      expect((await members()).map((m) => m.role)).toEqual(["leader", "worker"]);
      expect(await activeColors()).toHaveLength(1);
    } finally {
      release();
    }
  });

  test("the server failing after the member was reserved: member and color are given back", async () => {
    const ensure = ctx.edges.ensureProjectServer;
    if (!ensure) throw new Error("no ensureProjectServer");
    let reservedMeanwhile: boolean | undefined;
    ctx.edges.ensureProjectServer = async () => {
      // The lookup runs beside the member's reservation and the color's allocation: both come while it is under way.
      const deadline = Date.now() + 2_000;
      const reserved = async () => (await members()).length === 2 && (await activeColors()).length === 1;
      while (!(await reserved()) && Date.now() < deadline) await Bun.sleep(1);
      reservedMeanwhile = await reserved();
      ctx.serverStartFailure = "opencode exited with code 1 (log: /x/server.log)";
      return ensure();
    };
    expect((await spawn({})).error).toBe(
      "Failed to start OpenCode server: opencode exited with code 1 (log: /x/server.log)",
    );
    expect(reservedMeanwhile).toBe(true);
    await expectNoGhost();
  });
});

describe("spawn-agent: concurrency and colors", () => {
  test("5 concurrent spawns into one team: all succeed with distinct names, colors and panes", async () => {
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => spawn({ prompt: `task ${i}` })));
    expect(results.every((r) => r.success)).toBe(true);
    expect(new Set(results.map((r) => r.color)).size).toBe(5);
    expect(new Set(results.map((r) => r.paneId)).size).toBe(5);
    expect(new Set(results.map((r) => r.name)).size).toBe(5);
    expect((await members()).length).toBe(6);
    expect((await activeColors()).length).toBe(5);
    const { items } = await ctx.store.listAgentViews("alpha");
    expect(items.filter((v) => v.state.role === "worker" && v.state.status === "active")).toHaveLength(5);
  });

  test("all 10 colors held: the color of a stopped agent is reused, with a warning; else one is shared", async () => {
    const first = await Promise.all(COLOR_PALETTE.map(() => spawn({ headless: true })));
    expect(new Set(first.map((r) => r.color))).toEqual(new Set(COLOR_PALETTE));
    // The eleventh while all ten run: shared, with a warning.
    const shared = await spawn({ headless: true });
    expect(shared.success).toBe(true);
    expect(shared.warnings?.[0]).toMatch(/colors are held by running agents; '.*' is now shared/);
    // An agent that died without releasing its color (a crash): its color is taken over.
    const victim = first[3] as SpawnResult;
    await ctx.store.updateAgent("alpha", victim.agentId, (s) =>
      s ? { ...s, status: "inactive" } : undefined,
    );
    const reused = await spawn({ headless: true });
    expect(reused.color).toBe(victim.color);
    expect(reused.warnings?.[0]).toContain(`reused '${victim.color}' from agent ${victim.agentId}`);
  });
});

describe("spawn-agent: colors of spawns in progress", () => {
  test("an assignment whose agent file is not written yet is not taken over until a bring-up's grace passed", async () => {
    const first = await Promise.all(COLOR_PALETTE.map(() => spawn({ headless: true })));
    // As between the color's allocation and the agent file's creation, which a session's creation now spans.
    // Not the first color given: with every assignment made at one clock instant, that one is the one shared next.
    const pending = first.find((r) => r.color === COLOR_PALETTE[1]) as SpawnResult;
    await ctx.store.removeAgentFiles("alpha", pending.agentId);
    const next = await spawn({ headless: true });
    expect(next.color).not.toBe(pending.color);
    expect(next.warnings?.[0]).toMatch(/is now shared/);
    ctx.clock.advance(11 * 60_000);
    const later = await spawn({ headless: true });
    expect(later.color).toBe(pending.color);
    expect(later.warnings?.[0]).toContain(`reused '${pending.color}' from agent ${pending.agentId}`);
  });
});

describe("spawn-agent: plan", () => {
  test("the plan is kept in the state, the history (and its filter) and list-agents", async () => {
    const spawned = await spawn({ plan: "auth-rewrite" });
    expect(spawned.success).toBe(true);
    expect((await agentOnDisk(ctx, { agentId: spawned.agentId })).plan).toBe("auth-rewrite");
    const other = await spawn({});
    const history = await call<{ entries: { agent_id: string; plan?: string }[] }>(
      "agent-history",
      { teamName: "alpha", plan: "auth-rewrite" },
      LEADER,
    );
    expect(history.entries.map((e) => e.agent_id)).toEqual([spawned.agentId]);
    const listed = await call<{ agents: { agent_id: string; metadata: { plan: string | null } }[] }>(
      "list-agents",
      { teamName: "alpha", grouped: false },
      LEADER,
    );
    const planOf = (id: string) => listed.agents.find((a) => a.agent_id === id)?.metadata.plan;
    expect(planOf(spawned.agentId)).toBe("auth-rewrite");
    expect(planOf(other.agentId)).toBeNull();
  });

  test("a plan that is blank or has control characters is refused and nothing is created", async () => {
    for (const plan of ["   ", "a\u0007b"]) {
      const result = await spawn({ plan });
      expect(result).toMatchObject({ success: false, error: expect.stringContaining("Invalid plan") });
    }
    await expectNoGhost();
  });
});

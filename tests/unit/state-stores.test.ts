import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { v4 as uuidv4 } from "uuid";
import { collectWarnings } from "../../src/operations/call-warnings.ts";
import { recountActiveSessions } from "../../src/operations/server/server-sessions.ts";
import { ColorPoolSchema } from "../../src/state/color-store.ts";
import { StoragePaths } from "../../src/state/paths.ts";
import {
  AgentHistorySchema,
  SendLogSchema,
  type ServerInfo,
  ServerInfoSchema,
} from "../../src/state/schemas.ts";
import { readJson } from "../../src/state/store.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { leadTeam } from "../helpers/team.ts";

const NOW = "2026-01-01T00:00:00.000Z";
const PROJECT = "/project";

let dir: string;
let store: TeamStore;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-stores-"));
  store = new TeamStore(new StoragePaths(dir));
  await store.init();
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** Put a torn write where `file` belongs. */
async function damage(file: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, '{"version": 1, "entr');
}

/** The copies of `file` that were moved aside. */
async function movedAside(file: string): Promise<string[]> {
  const names = await readdir(path.dirname(file));
  return names.filter((name) => name.startsWith(`${path.basename(file)}.corrupt-`));
}

const serverInfo: ServerInfo = {
  version: 1,
  projectPath: PROJECT,
  pid: 4242,
  port: 28_001,
  hostname: "127.0.0.1",
  startedAt: NOW,
  activeSessions: 0,
  logPath: "/project/server.log",
};

describe("HistoryStore: a damaged history is moved aside and rebuilt, with a warning", () => {
  const empty = { version: 1 as const, max_entries: 10, entries: [] };
  const rebuilt = {
    ...empty,
    entries: [
      {
        agent_id: "a1",
        agent_type: "worker",
        task_description: "t",
        timestamp: NOW,
        status: "spawned" as const,
        completion_timestamp: null,
      },
    ],
  };

  test("read: the rebuild is returned and written", async () => {
    const file = store.paths.history("alpha");
    await damage(file);
    const read = await store.history.read("alpha", empty, async () => rebuilt);
    expect(read.history).toEqual(rebuilt);
    expect(read.warnings).toEqual([
      expect.stringMatching(/agent-history\.json was damaged .*moved aside.*; history rebuilt/),
    ]);
    expect(await movedAside(file)).toHaveLength(1);
    expect(await readJson(file, AgentHistorySchema)).toEqual({ kind: "ok", value: rebuilt });
  });

  test("read: a missing history is the empty one, without a warning", async () => {
    expect(await store.history.read("alpha", empty, async () => rebuilt)).toEqual({
      history: empty,
      warnings: [],
    });
  });

  test("update: the change sees no history and its result is written", async () => {
    await damage(store.paths.history("alpha"));
    let seen: unknown = "not called";
    const warnings = await store.history.update("alpha", async (current) => {
      seen = current;
      return rebuilt;
    });
    expect(seen).toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining("history rebuilt from the agent state files")]);
    expect((await store.history.read("alpha", empty, async () => empty)).history).toEqual(rebuilt);
  });
});

describe("ColorStore: a damaged pool starts over, with a warning", () => {
  test("update sees no pool, writes the new one and says colors are assigned afresh", async () => {
    await damage(store.paths.colorPool);
    let seen: unknown = "not called";
    const pool = {
      version: 1 as const,
      assignments: [{ color: "blue", agentId: "a1", teamName: "alpha", assignedAt: NOW }],
    };
    const warnings = await store.colors.update((current) => {
      seen = current;
      return pool;
    });
    expect(seen).toBeUndefined();
    expect(warnings).toEqual([
      expect.stringMatching(/color-pool\.json was damaged .*; colors are assigned afresh/),
    ]);
    expect(await movedAside(store.paths.colorPool)).toHaveLength(1);
    expect(await readJson(store.paths.colorPool, ColorPoolSchema)).toEqual({ kind: "ok", value: pool });
  });
});

describe("ServerInfoStore: a damaged record is moved aside and read as no server", () => {
  test("read reports it; update sees no record, writes nothing and returns the warning", async () => {
    const file = store.paths.serverInfo(PROJECT);
    await damage(file);
    const read = await store.serverInfo.read(PROJECT);
    expect(read).toMatchObject({
      kind: "corrupt",
      warning: expect.stringContaining("server.json was damaged"),
    });
    expect(await movedAside(file)).toHaveLength(1);
    await damage(file);
    const outcome = await store.serverInfo.update(
      PROJECT,
      async (current) => current && { ...current, pid: 1 },
    );
    expect(outcome).toEqual({
      value: undefined,
      warnings: [expect.stringContaining("server.json was damaged")],
    });
    expect(await store.serverInfo.read(PROJECT)).toEqual({ kind: "missing" });
  });

  test("write replaces a damaged record; remove takes it away", async () => {
    const file = store.paths.serverInfo(PROJECT);
    await damage(file);
    await store.serverInfo.write(PROJECT, serverInfo);
    expect(await readJson(file, ServerInfoSchema)).toEqual({ kind: "ok", value: serverInfo });
    await store.serverInfo.remove(PROJECT);
    expect(await store.serverInfo.read(PROJECT)).toEqual({ kind: "missing" });
  });
});

describe("SendLogStore: a damaged send log starts empty, with a warning", () => {
  test("update sees no log and writes the new one", async () => {
    const sender = uuidv4();
    const file = store.paths.sendLog("alpha", sender);
    await damage(file);
    let seen: unknown = "not called";
    const warnings = await store.sendLog.update("alpha", sender, (current) => {
      seen = current;
      return { version: 1, sentAt: [NOW] };
    });
    expect(seen).toBeUndefined();
    expect(warnings).toEqual([
      expect.stringMatching(/\.json was damaged .*; the send rate limit starts over/),
    ]);
    expect(await readJson(file, SendLogSchema)).toEqual({ kind: "ok", value: { version: 1, sentAt: [NOW] } });
  });
});

describe("NoticeDigestStore: a damaged digest record reads as none, noted for the team's next listing", () => {
  test("lastSentAt is undefined and the warning reaches withDamageNotes once", async () => {
    const file = store.paths.noticeDigest("alpha");
    await damage(file);
    const sent = await store.noticeDigest.withLock("alpha", () => store.noticeDigest.lastSentAt("alpha"));
    expect(sent).toBeUndefined();
    expect(await movedAside(file)).toHaveLength(1);
    expect(store.withDamageNotes("alpha", [])).toEqual([
      expect.stringContaining("notice-digest.json was damaged"),
    ]);
    expect(store.withDamageNotes("alpha", [])).toEqual([]);
    await store.noticeDigest.recordSent("alpha", NOW);
    expect(await store.noticeDigest.lastSentAt("alpha")).toBe(NOW);
  });
});

describe("damage met by an operation reaches the caller", () => {
  let ctx: TestContext;
  beforeEach(async () => {
    ctx = await makeTestContext();
  });
  afterEach(() => ctx.cleanup());

  test("send-message with a damaged send log: sent, and the result says the log was damaged", async () => {
    const { call, leaderId } = await leadTeam(ctx);
    const worker = await addAgent(ctx, "alpha", { name: "w1" });
    ctx.server.addSession({ id: worker.sessionId });
    await damage(ctx.store.paths.sendLog("alpha", leaderId));
    const sent = await call<{ success: boolean; warnings?: string[] }>(
      "send-message",
      { teamName: "alpha", to: "w1", message: "check the tests" },
      "ses_lead",
    );
    expect(sent).toMatchObject({
      success: true,
      warnings: [expect.stringContaining("the send rate limit starts over")],
    });
  });

  test("a recount that meets a damaged server record: no count, and the call's warnings say so", async () => {
    await damage(ctx.store.paths.serverInfo(ctx.projectRoot));
    const { value, warnings } = await collectWarnings(() => recountActiveSessions(ctx));
    expect(value).toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining("server.json was damaged")]);
  });
});

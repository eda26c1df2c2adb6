import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readdir, readFile, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createTeam } from "../../src/operations/team.ts";
import type { AgentState } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";

let ctx: TestContext;
let agents: AgentState[];

beforeEach(async () => {
  ctx = await makeTestContext();
  const created = await createTeam(ctx, { teamName: "alpha" }, "ses_lead");
  if (!created.success) throw new Error(created.error);
  agents = [];
  for (let i = 1; i <= 3; i++) agents.push(await addAgent(ctx, "alpha", { name: `worker-${i}` }));
});
afterEach(() => ctx.cleanup());

function fileOf(agent: AgentState): string {
  return ctx.store.paths.agentState("alpha", agent.agentId);
}

async function onDisk(agent: AgentState): Promise<AgentState> {
  return JSON.parse(await readFile(fileOf(agent), "utf8")) as AgentState;
}

async function current(agent: AgentState): Promise<AgentState> {
  const read = await ctx.store.readAgent("alpha", agent.agentId);
  if (read.kind !== "ok") throw new Error(read.kind);
  return read.value;
}

/** Mark every agent inactive in one batch. */
function markAll(reason = "swept"): Promise<string[]> {
  return ctx.store.updateAgents(
    "alpha",
    agents.map((a) => a.agentId),
    async (agentId, state) => ({
      ...(state ? { next: { ...state, status: "inactive" as const, statusReason: reason } } : {}),
      result: agentId,
    }),
  );
}

describe("updateAgents", () => {
  test("one journal write: every reader sees the new states, the agent files stay as they were", async () => {
    const results = await markAll();
    expect(results).toEqual(agents.map((a) => a.agentId));
    for (const agent of agents) {
      expect((await onDisk(agent)).status).toBe("active");
      expect((await current(agent)).status).toBe("inactive");
      const view = await ctx.store.readAgentView("alpha", agent.agentId);
      expect(view.kind === "ok" && view.value.state.status).toBe("inactive");
    }
    const listed = await ctx.store.listAgentViews("alpha");
    const workers = listed.items.filter((v) => v.state.role === "worker");
    expect(workers.map((v) => v.state.status)).toEqual(["inactive", "inactive", "inactive"]);
    const journal = JSON.parse(await readFile(ctx.store.paths.agentJournal("alpha"), "utf8"));
    expect(Object.keys(journal.entries).sort()).toEqual(agents.map((a) => a.agentId).sort());
  });

  test("decide sees the state through the journal, and an agent left unchanged gets no entry", async () => {
    await markAll("first");
    const seen: string[] = [];
    await ctx.store.updateAgents("alpha", [agents[0]?.agentId ?? ""], async (_id, state) => {
      seen.push(`${state?.status}:${state?.statusReason}`);
      return { result: undefined };
    });
    expect(seen).toEqual(["inactive:first"]);
  });

  test("a later write of the agent file supersedes its entry; updateAgent starts from the journal's state", async () => {
    await markAll();
    const [first, second] = agents as [AgentState, AgentState];
    const updated = await ctx.store.updateAgent("alpha", first.agentId, (state) =>
      state ? { ...state, statusReason: `${state.status}, then reviewed` } : undefined,
    );
    expect(updated.value?.statusReason).toBe("inactive, then reviewed");
    expect((await onDisk(first)).status).toBe("inactive");
    await ctx.store.writeAgent({ ...(await onDisk(second)), status: "terminated", statusReason: "killed" });
    expect((await current(second)).status).toBe("terminated");
  });

  test("a batch waits for a held agent lock; an agent lock waits for a running batch", async () => {
    const order: string[] = [];
    const [first] = agents as [AgentState];
    const holder = ctx.store.withAgentLock("alpha", first.agentId, async () => {
      await sleep(150);
      order.push("holder done");
    });
    await sleep(20);
    let lateLocker: Promise<void> | undefined;
    await ctx.store.updateAgents("alpha", [first.agentId], async (agentId, state) => {
      order.push("batch decides");
      lateLocker = ctx.store.withAgentLock("alpha", agentId, async () => {
        order.push(`late locker sees ${(await current(first)).status}`);
      });
      await sleep(100);
      return { ...(state ? { next: { ...state, status: "inactive" as const } } : {}), result: undefined };
    });
    order.push("batch done");
    await holder;
    await lateLocker;
    expect(order).toEqual(["holder done", "batch decides", "batch done", "late locker sees inactive"]);
  });
});

describe("foldAgentJournal", () => {
  test("writes entries into the agent files a share at a time, then removes the journal", async () => {
    await markAll();
    expect(await ctx.store.foldAgentJournal("alpha", 2)).toBe(2);
    const statuses = await Promise.all(agents.map(async (a) => (await onDisk(a)).status));
    expect(statuses.filter((s) => s === "inactive")).toHaveLength(2);
    expect(await ctx.store.foldAgentJournal("alpha", 2)).toBe(1);
    for (const agent of agents) expect((await onDisk(agent)).status).toBe("inactive");
    expect(await readdir(path.dirname(ctx.store.paths.agentJournal("alpha")))).not.toContain(
      "agent-journal.json",
    );
    expect(await ctx.store.foldAgentJournal("alpha", 2)).toBe(0);
  });

  test("an entry a later write made obsolete is dropped, not written over that write", async () => {
    await markAll();
    const [first] = agents as [AgentState];
    await ctx.store.writeAgent({ ...(await onDisk(first)), statusReason: "written after the batch" });
    await ctx.store.foldAgentJournal("alpha", 10);
    const after = await onDisk(first);
    expect(after.status).toBe("active");
    expect(after.statusReason).toBe("written after the batch");
  });
});

test("a damaged journal is moved aside and read as empty: agents are as their files say", async () => {
  await markAll();
  const file = ctx.store.paths.agentJournal("alpha");
  await writeFile(file, "{ torn");
  for (const agent of agents) expect((await current(agent)).status).toBe("active");
  const names = await readdir(path.dirname(file));
  expect(names.some((name) => name.startsWith("agent-journal.json.corrupt-"))).toBe(true);
});

test("a journal lock left by a crashed batch holds up agent locks only until it goes stale", async () => {
  const [first] = agents as [AgentState];
  const lock = `${ctx.store.paths.agentJournal("alpha")}.lock`;
  await writeFile(lock, "");
  const old = new Date(Date.now() - 60_000);
  await utimes(lock, old, old);
  let ran = false;
  await ctx.store.withAgentLock("alpha", first.agentId, async () => {
    ran = true;
  });
  expect(ran).toBe(true);
});

test("an entry that changes nothing is dropped by the fold, not folded again and again", async () => {
  const [first] = agents as [AgentState];
  await ctx.store.updateAgents("alpha", [first.agentId], async (_id, state) => ({
    ...(state ? { next: { ...state } } : {}),
    result: undefined,
  }));
  expect(await ctx.store.foldAgentJournal("alpha", 10)).toBe(1);
  expect(await Bun.file(ctx.store.paths.agentJournal("alpha")).exists()).toBe(false);
});

test("folding leaves the other agents' locks free: a heartbeat-sized lock of another agent is not held up", async () => {
  await markAll();
  const [first, second] = agents as [AgentState, AgentState];
  // Hold the first agent's lock so the fold waits on it, and take the second's meanwhile.
  let release: () => void = () => {};
  const held = ctx.store.withAgentLock("alpha", first.agentId, () => new Promise<void>((r) => (release = r)));
  const folding = ctx.store.foldAgentJournal("alpha", 10);
  await sleep(50);
  let otherRan = false;
  await ctx.store.withAgentLock("alpha", second.agentId, async () => {
    otherRan = true;
  });
  expect(otherRan).toBe(true);
  release();
  await held;
  expect(await folding).toBe(3);
  for (const agent of agents) expect((await onDisk(agent)).status).toBe("inactive");
});

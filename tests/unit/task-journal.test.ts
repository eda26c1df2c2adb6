import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { appendFile, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { TaskBoard } from "../../src/state/schemas.ts";
import { TeamStore } from "../../src/state/team-store.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { teamWithTasks } from "../helpers/team.ts";
import type { ToolCall } from "../helpers/tools.ts";

// The board's status changes go to a journal beside it (specs/storage.md, "The task board's journal"): what a reader
// makes of it in every state a writer, a crash or a damaged disk can leave.

let ctx: TestContext;
let call: ToolCall;
const LEADER = "ses_lead";
type Res = { success: boolean; task?: { id: string } | null; warnings?: string[]; error?: string };

beforeEach(async () => {
  ctx = await makeTestContext();
  ({ call } = await teamWithTasks(ctx, ["one", "two", "three"]));
});
afterEach(() => ctx.cleanup());

const boardFile = () => ctx.store.paths.tasks("alpha");
const journalFile = () => path.join(path.dirname(boardFile()), "tasks.journal");
const journalLines = async () =>
  (await readFile(journalFile(), "utf8")).split("\n").filter((line) => line !== "");
/** Another process's view: a store with a cache of its own over the same files. */
const fresh = () => new TeamStore(ctx.store.paths, ctx.store.lockTiming);

async function board(store: TeamStore = fresh()): Promise<TaskBoard> {
  const read = await store.readTasks("alpha");
  if (read.kind !== "ok") throw new Error(`board is ${read.kind}`);
  return read.value;
}
const statuses = async (store?: TeamStore) => (await board(store)).tasks.map((task) => task.status);

async function claim(sessionId: string): Promise<string> {
  const result = await call<Res>("claim-task", { teamName: "alpha" }, sessionId);
  if (!result.success || !result.task) throw new Error(`claim failed: ${JSON.stringify(result)}`);
  return result.task.id;
}

/** A status change through the store, as hand-back makes it: task `i` set to `status`. */
function setStatus(
  store: TeamStore,
  i: number,
  status: "pending" | "in_progress",
  at = "2026-01-01T00:00:00.000Z",
) {
  return store.updateTasks("alpha", (current) => ({
    ...current,
    tasks: current.tasks.map((task, index) =>
      index === i ? { ...task, status, assignee: null, updatedAt: at } : task,
    ),
  }));
}

describe("status changes go to the journal", () => {
  test("a claim appends one line and leaves the board's file as it was; another process reads the claim", async () => {
    await addAgent(ctx, "alpha", { sessionId: "ses_w", name: "worker-1" });
    // The first status change of a board that has no generation yet rewrites it; from then on, lines.
    await claim("ses_w");
    const before = await readFile(boardFile(), "utf8");
    const lines = (await journalLines()).length;
    const id = await claim("ses_w");
    expect(await readFile(boardFile(), "utf8")).toBe(before);
    expect(await journalLines()).toHaveLength(lines + 1);
    expect((await board()).tasks.find((task) => task.id === id)?.status).toBe("in_progress");
    expect(await statuses()).toEqual(["in_progress", "in_progress", "pending"]);
  });

  test("a line replayed twice gives the same board (absolute values), and a reason it drops is gone", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await ctx.store.updateTasks("alpha", (current) => ({
      ...current,
      tasks: current.tasks.map((task, index) =>
        index === 1 ? { ...task, status: "failed", reason: "no" } : task,
      ),
    }));
    await setStatus(ctx.store, 0, "pending", "2026-01-02T00:00:00.000Z");
    const once = await board();
    const lines = await journalLines();
    // Every record again, after the ones already there: nothing changes.
    await appendFile(journalFile(), `${lines.slice(1).join("\n")}\n`);
    expect(await board()).toEqual(once);
    expect(once.tasks.map((task) => [task.status, task.updatedAt, task.reason])).toEqual([
      ["pending", "2026-01-02T00:00:00.000Z", undefined],
      ["failed", expect.any(String), "no"],
      ["pending", expect.any(String), undefined],
    ]);
  });

  test("a change of anything but status fields rewrites the board and starts a fresh journal", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await setStatus(ctx.store, 1, "in_progress");
    const generation = (await board()).generation;
    await call("create-task", { teamName: "alpha", title: "four" }, LEADER);
    const after = await board();
    expect(after.generation).not.toBe(generation);
    expect(after.tasks.map((task) => task.status)).toEqual([
      "in_progress",
      "in_progress",
      "pending",
      "pending",
    ]);
    expect(await journalLines()).toEqual([JSON.stringify({ version: 1, generation: after.generation })]);
    // A definition changed together with a status (no tool does it; the store must not drop it into a status record).
    await ctx.store.updateTasks("alpha", (current) => ({
      ...current,
      tasks: current.tasks.map((task, index) =>
        index === 3
          ? { ...task, title: "four, renamed", blockedBy: ["task-1"], status: "in_progress" as const }
          : task,
      ),
    }));
    const renamed = (await board()).tasks[3];
    expect([renamed?.title, renamed?.blockedBy, renamed?.status]).toEqual([
      "four, renamed",
      ["task-1"],
      "in_progress",
    ]);
    expect((await board()).generation).not.toBe(after.generation);
  });

  test("past its bound the journal is compacted into the board, and nothing is lost", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    const first = (await board()).generation;
    for (let n = 0; n < 300; n++) {
      await setStatus(
        ctx.store,
        n % 3,
        n % 2 === 0 ? "pending" : "in_progress",
        new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
      );
    }
    const lines = await journalLines();
    expect(lines.length).toBeLessThanOrEqual(257);
    expect((await board()).generation).not.toBe(first);
    // The last three changes: n = 297, 298, 299 on tasks 0, 1, 2.
    expect(await statuses()).toEqual(["in_progress", "pending", "in_progress"]);
    expect((await board()).tasks[2]?.updatedAt).toBe("2026-01-01T00:04:59.000Z");
    expect(await board(ctx.store)).toEqual(await board());
  });
});

describe("a journal as a crash or a disk can leave it", () => {
  test("a torn last line is not applied, and the next writer cuts it before appending", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await setStatus(ctx.store, 1, "in_progress");
    await appendFile(journalFile(), '{"tasks":[{"i":2,"id":"task-3","status":"compl');
    expect(await statuses()).toEqual(["in_progress", "in_progress", "pending"]);
    await setStatus(fresh(), 0, "pending");
    const text = await readFile(journalFile(), "utf8");
    expect(text.endsWith("\n")).toBe(true);
    expect(text).not.toContain("compl\n");
    expect(text).not.toContain('"compl');
    expect(await statuses()).toEqual(["pending", "in_progress", "pending"]);
    expect((await readdir(path.dirname(boardFile()))).filter((name) => name.includes(".corrupt-"))).toEqual(
      [],
    );
  });

  test("a torn line after text that is not ASCII is cut at its byte, not at its character", async () => {
    const reason = "naïve ✓ 日本語のテキスト — 🙂";
    await ctx.store.updateTasks("alpha", (current) => ({
      ...current,
      tasks: current.tasks.map((task, index) => (index === 1 ? { ...task, status: "failed", reason } : task)),
    }));
    await appendFile(journalFile(), '{"tasks":[{"i":2,"id":"task-3","status":"compl');
    await setStatus(fresh(), 0, "in_progress");
    await setStatus(fresh(), 2, "in_progress");
    const lines = (await readFile(journalFile(), "utf8")).split("\n");
    expect(lines.pop()).toBe("");
    for (const line of lines) JSON.parse(line);
    const read = await board();
    expect(read.tasks.map((task) => task.status)).toEqual(["in_progress", "failed", "in_progress"]);
    expect(read.tasks[1]?.reason).toBe(reason);
    expect(fresh().withDamageNotes("alpha", [])).toEqual([]);
  });

  test("a damaged line: the others are applied, the board is rewritten from them, a copy is kept, the task is named", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await setStatus(ctx.store, 1, "in_progress");
    await setStatus(ctx.store, 2, "in_progress");
    const lines = await journalLines();
    lines[2] = `${lines[2]?.slice(0, 30)}#garbage#"}]}`;
    await writeFile(journalFile(), `${lines.join("\n")}\n`);
    const reader = fresh();
    expect(await statuses(reader)).toEqual(["in_progress", "pending", "in_progress"]);
    const notes = reader.withDamageNotes("alpha", []);
    expect(notes.join("\n")).toContain("tasks.journal line 3 was damaged");
    expect(notes.join("\n")).toContain("task 'task-2'");
    expect(notes.join("\n")).toContain("kept aside as tasks.journal.corrupt-");
    const dir = await readdir(path.dirname(boardFile()));
    expect(dir.filter((name) => name.startsWith("tasks.journal.corrupt-"))).toHaveLength(1);
    // Repaired: the board holds the readable state and the journal starts afresh.
    expect(await journalLines()).toHaveLength(1);
    expect(await statuses()).toEqual(["in_progress", "pending", "in_progress"]);
  });

  test("a writer that meets a damaged line repairs it too, and says so in the tool's warnings", async () => {
    await addAgent(ctx, "alpha", { sessionId: "ses_w", name: "worker-1" });
    await setStatus(ctx.store, 1, "in_progress");
    await setStatus(ctx.store, 2, "in_progress");
    await appendFile(journalFile(), "not json at all\n");
    const result = await call<Res>("claim-task", { teamName: "alpha" }, "ses_w");
    expect(result.task?.id).toBe("task-1");
    expect(result.warnings?.join("\n")).toContain("tasks.journal line 4 was damaged (invalid JSON");
    expect(result.warnings?.join("\n")).not.toContain("starts empty again");
    expect(await statuses()).toEqual(["in_progress", "in_progress", "in_progress"]);
  });

  test("another generation's records are never applied: a compaction met midway, or a crash between its steps", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await setStatus(ctx.store, 1, "in_progress");
    const oldJournal = await readFile(journalFile(), "utf8");
    // A compaction: the board rewritten (it holds both changes and one more) under a new generation...
    await ctx.store.updateTasks("alpha", (current) => ({ ...current, nextId: current.nextId + 1 }));
    await setStatus(ctx.store, 2, "in_progress");
    await ctx.store.updateTasks("alpha", (current) => ({ ...current, nextId: current.nextId + 1 }));
    const compacted = await board();
    // ...and the journal not yet reset (the crash): the old generation's records say task 2 is pending.
    await writeFile(journalFile(), `${oldJournal}${oldJournal.split("\n")[1]}\n`);
    await appendFile(
      journalFile(),
      `${JSON.stringify({ tasks: [{ i: 2, id: "task-3", status: "pending", assignee: null, updatedAt: "2026-01-01T00:00:00.000Z" }] })}\n`,
    );
    expect(await board()).toEqual(compacted);
    expect(await statuses()).toEqual(["in_progress", "in_progress", "in_progress"]);
    // The next writer starts a journal of the board's generation; nothing of the board is lost.
    await setStatus(fresh(), 0, "pending");
    expect(await statuses()).toEqual(["pending", "in_progress", "in_progress"]);
    expect(JSON.parse((await journalLines())[0] ?? "{}").generation).toBe((await board()).generation);
  });

  test("a journal with an unreadable header applies nothing and is repaired, with a warning", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    const lines = await journalLines();
    await setStatus(ctx.store, 1, "in_progress");
    await writeFile(journalFile(), `{"version":1,"gener\n${lines.slice(1).join("\n")}\n`);
    const reader = fresh();
    // Its one record (task 1 in progress) may be another board's: the board alone is read.
    expect(await statuses(reader)).toEqual(["pending", "pending", "pending"]);
    expect(reader.withDamageNotes("alpha", []).join("\n")).toContain("header is unreadable");
    expect(await journalLines()).toHaveLength(1);
  });

  test("a board lost with its journal: the new board starts empty and the old journal is kept aside", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    await writeFile(boardFile(), "{ damaged");
    const result = await call<Res>("create-task", { teamName: "alpha", title: "again" }, LEADER);
    expect(result.success).toBe(true);
    const warnings = result.warnings?.join("\n") ?? "";
    expect(warnings).toContain("starts empty again");
    expect(warnings).toContain("tasks.journal of the lost board was kept aside");
    expect((await board()).tasks).toHaveLength(1);
    expect(await journalLines()).toHaveLength(1);
  });
});

describe("the board as cached", () => {
  test("unchanged files give the same board object; another process's change is seen at once", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    const mine = await board(ctx.store);
    expect(await board(ctx.store)).toBe(mine);
    const other = fresh();
    await setStatus(other, 1, "in_progress");
    const seen = await board(ctx.store);
    expect(seen).not.toBe(mine);
    expect(seen.tasks.map((task) => task.status)).toEqual(["in_progress", "in_progress", "pending"]);
    // The board handed out before is not changed by later writes.
    expect(mine.tasks.map((task) => task.status)).toEqual(["in_progress", "pending", "pending"]);
    // Back and forth between two stores, with compactions among the writes: each sees the other's last change.
    for (let n = 0; n < 40; n++) {
      const [writer, reader] = n % 2 === 0 ? [other, ctx.store] : [ctx.store, other];
      await setStatus(
        writer,
        n % 3,
        n % 4 < 2 ? "pending" : "in_progress",
        new Date(Date.UTC(2026, 0, 2, 0, 0, n)).toISOString(),
      );
      expect((await board(reader)).tasks[n % 3]?.updatedAt).toBe(
        new Date(Date.UTC(2026, 0, 2, 0, 0, n)).toISOString(),
      );
    }
  });

  test("a reader that kept the board adds only what another process appended since, whole lines only", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    const mine = await board(ctx.store);
    const other = fresh();
    await setStatus(other, 1, "in_progress");
    const grown = await board(ctx.store);
    expect(grown.tasks.map((task) => task.status)).toEqual(["in_progress", "in_progress", "pending"]);
    // Not parsed again: the tasks no record touched are the very objects read before.
    expect(grown.tasks[0]).toBe(mine.tasks[0] as never);
    expect(grown.tasks[2]).toBe(mine.tasks[2] as never);
    // An append in flight (no newline yet) is left for later, then read once whole.
    const line = JSON.stringify({
      tasks: [
        { i: 2, id: "task-3", status: "in_progress", assignee: null, updatedAt: "2026-01-03T00:00:00.000Z" },
      ],
    });
    await appendFile(journalFile(), line.slice(0, 20));
    expect(await statuses(ctx.store)).toEqual(["in_progress", "in_progress", "pending"]);
    await appendFile(journalFile(), `${line.slice(20)}\n`);
    expect(await statuses(ctx.store)).toEqual(["in_progress", "in_progress", "in_progress"]);
    // A rewrite of the board by the other process: read whole again.
    await other.updateTasks("alpha", (current) => ({ ...current, nextId: current.nextId + 1 }));
    await setStatus(other, 0, "pending");
    expect(await statuses(ctx.store)).toEqual(["pending", "in_progress", "in_progress"]);
    expect(await board(ctx.store)).toEqual(await board());
  });

  test("an update that changes nothing (a claim that finds nothing ready) keeps the board it had", async () => {
    await setStatus(ctx.store, 0, "in_progress");
    const mine = await board(ctx.store);
    await ctx.store.updateTasks("alpha", () => undefined);
    expect(await board(ctx.store)).toBe(mine);
  });

  test("claim-task reads the caller's agent file once", async () => {
    await addAgent(ctx, "alpha", { sessionId: "ses_w", name: "worker-1" });
    const reads: string[] = [];
    const readAgent = ctx.store.readAgent.bind(ctx.store);
    ctx.store.readAgent = (teamName, agentId, options) => {
      reads.push(agentId);
      return readAgent(teamName, agentId, options);
    };
    await claim("ses_w");
    expect(reads).toHaveLength(1);
    reads.length = 0;
    const started = await call<Res>(
      "update-task",
      { teamName: "alpha", taskId: "task-2", status: "in_progress" },
      "ses_w",
    );
    expect(started.success).toBe(true);
    expect(reads).toHaveLength(1);
  });
});

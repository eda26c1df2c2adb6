import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { z } from "zod";
import { decodeSlot, encodeSlot, readSlot, SLOT_SIZE, writeSlot } from "../../src/state/heartbeat-slot.ts";
import { createJson, ensureStorageRoot, readJson, updateJson, writeJson } from "../../src/state/store.ts";

const Counter = z.object({ version: z.literal(1), count: z.number().int() });
let dir = "";

afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  dir = await mkdtemp(path.join(tmpdir(), "oct-store-"));
  return dir;
}

describe("json store", () => {
  test("write then read round-trips and validates", async () => {
    const file = path.join(await tempDir(), "a", "b.json");
    await writeJson(file, Counter, { version: 1, count: 3 });
    expect(await readJson(file, Counter)).toEqual({ kind: "ok", value: { version: 1, count: 3 } });
  });

  test("a blocking read (ReadOptions) finds what an async one finds: value, missing, damage moved aside", async () => {
    const root = await tempDir();
    const file = path.join(root, "b.json");
    expect(await readJson(file, Counter, { blocking: true })).toEqual({ kind: "missing" });
    await writeJson(file, Counter, { version: 1, count: 3 });
    expect(await readJson(file, Counter, { blocking: true })).toEqual({
      kind: "ok",
      value: { version: 1, count: 3 },
    });
    await writeFile(file, '{"version":1,"cou');
    expect((await readJson(file, Counter, { blocking: true })).kind).toBe("corrupt");
    expect((await readdir(root)).some((name) => name.startsWith("b.json.corrupt-"))).toBe(true);
  });

  test("a value that fails its schema is refused before anything is written", async () => {
    const file = path.join(await tempDir(), "x.json");
    await expect(writeJson(file, Counter, { version: 1, count: 1.5 })).rejects.toThrow();
    expect(await readJson(file, Counter)).toEqual({ kind: "missing" });
  });

  test.each([
    ["truncated JSON", '{"version":1,"cou'],
    ["empty file", ""],
    ["wrong shape", '{"version":1,"count":"three"}'],
    ["wrong version", '{"version":2,"count":3}'],
  ])("%s is moved aside with a warning and reads continue", async (_label, text) => {
    const root = await tempDir();
    const file = path.join(root, "damaged.json");
    await writeFile(file, text);
    const result = await readJson(file, Counter);
    expect(result.kind).toBe("corrupt");
    if (result.kind !== "corrupt") throw new Error("unreachable");
    expect(result.warning).toContain("damaged.json was damaged");
    const names = await readdir(root);
    expect(names.some((name) => name.startsWith("damaged.json.corrupt-"))).toBe(true);
    expect(names).not.toContain("damaged.json");
    expect(await readFile(result.movedTo as string, "utf8")).toBe(text);
    // The next read-modify-write starts clean.
    const updated = await updateJson(file, Counter, (current) => ({
      version: 1 as const,
      count: (current?.count ?? 0) + 1,
    }));
    expect(updated.value).toEqual({ version: 1, count: 1 });
  });

  test("updateJson reports a damaged file it replaced", async () => {
    const file = path.join(await tempDir(), "c.json");
    await writeFile(file, "{nope");
    const outcome = await updateJson(file, Counter, () => ({ version: 1 as const, count: 7 }));
    expect(outcome.warnings).toHaveLength(1);
    expect(outcome.warnings[0]).toContain("moved aside");
  });

  test("createJson never clobbers", async () => {
    const file = path.join(await tempDir(), "once.json");
    await createJson(file, Counter, { version: 1, count: 1 });
    await expect(createJson(file, Counter, { version: 1, count: 2 })).rejects.toMatchObject({
      code: "EEXIST",
    });
    expect(await readJson(file, Counter)).toEqual({ kind: "ok", value: { version: 1, count: 1 } });
  });

  test("the storage root ignores itself in git", async () => {
    const root = path.join(await tempDir(), "store");
    await ensureStorageRoot(root);
    await ensureStorageRoot(root);
    expect(await readFile(path.join(root, ".gitignore"), "utf8")).toBe("*\n");
  });
});

describe("heartbeat slot", () => {
  const record = {
    version: 1 as const,
    heartbeatTs: "2026-01-01T00:00:00.000Z",
    source: "tool" as const,
    updates: 4,
  };

  test("round-trips through a fixed-size slot", async () => {
    const file = path.join(await tempDir(), "agent.hb");
    writeSlot(file, record);
    writeSlot(file, { ...record, updates: 5 });
    expect((await readFile(file)).length).toBe(SLOT_SIZE);
    expect(await readSlot(file)).toEqual({ kind: "ok", record: { ...record, updates: 5 } });
  });

  // A heartbeat reads its slot with blocking calls (ReadOptions); both ways must tell the same story.
  for (const blocking of [false, true]) {
    const how = blocking ? "blocking" : "async";
    test(`${how} read: a record longer than the slot's head is read whole`, async () => {
      const file = path.join(await tempDir(), "agent.hb");
      const long = { ...record, metadata: { note: "x".repeat(6000) } };
      writeSlot(file, long);
      expect(await readSlot(file, { blocking })).toEqual({ kind: "ok", record: long });
    });

    test(`${how} read: a missing slot is missing, a damaged one moved aside`, async () => {
      const root = await tempDir();
      const file = path.join(root, "agent.hb");
      expect(await readSlot(file, { blocking })).toEqual({ kind: "missing" });
      await writeFile(file, "garbage");
      expect((await readSlot(file, { blocking })).kind).toBe("corrupt");
      expect((await readdir(root)).some((name) => name.startsWith("agent.hb.corrupt-"))).toBe(true);
    });
  }

  test("a torn write (old and new bytes mixed) fails its checksum", () => {
    const older = encodeSlot(record).toString();
    const newer = encodeSlot({ ...record, heartbeatTs: "2026-01-01T00:09:59.999Z" }).toString();
    const mixed = newer.slice(0, 70) + older.slice(70);
    expect(decodeSlot(mixed)).toEqual({ ok: false, problem: "checksum mismatch" });
    expect(decodeSlot(newer).ok).toBe(true);
  });

  test("the checksum is the SHA-1 hex of the body, so slots written by earlier versions still read", () => {
    const line = encodeSlot(record).toString().trim();
    const space = line.indexOf(" ");
    const body = line.slice(space + 1);
    expect(line.slice(0, space)).toBe(createHash("sha1").update(body).digest("hex"));
  });

  test("a damaged slot is moved aside and reported", async () => {
    const root = await tempDir();
    const file = path.join(root, "agent.hb");
    await writeFile(file, "garbage");
    const result = await readSlot(file);
    expect(result.kind).toBe("corrupt");
    expect((await readdir(root)).some((name) => name.startsWith("agent.hb.corrupt-"))).toBe(true);
  });

  test("oversized records are refused", () => {
    expect(() => encodeSlot({ ...record, metadata: { blob: "x".repeat(SLOT_SIZE) } })).toThrow(RangeError);
  });

  describe("usage", () => {
    const totals = (input: number, costUsd: number) => ({
      input,
      output: 5,
      reasoning: 0,
      cacheRead: 0,
      cacheWrite: 0,
      total: input + 5,
      costUsd,
      turns: 2,
    });
    const countedAt = "2026-01-01T00:00:01.000Z";
    const oneModel = { totals: totals(10, 0.02), byModel: { "mock/a": totals(10, 0.02) }, countedAt };
    const twoModels = {
      totals: totals(30, 0.06),
      byModel: { "mock/a": totals(10, 0.02), "mock/b": totals(20, 0.04) },
      countedAt,
    };
    const body = (slot: Buffer) => JSON.parse(slot.toString().trim().split(" ").slice(1).join(" "));

    test("one model's count is written once (its model named) and reads back whole", async () => {
      const file = path.join(await tempDir(), "agent.hb");
      expect(body(encodeSlot({ ...record, usage: oneModel })).usage).toEqual({
        totals: oneModel.totals,
        model: "mock/a",
        countedAt,
      });
      writeSlot(file, { ...record, usage: oneModel });
      // Read by another process: the bytes, not what this one remembers of its own write.
      const line = (await readFile(file)).toString();
      expect(decodeSlot(line)).toEqual({ ok: true, record: { ...record, usage: oneModel } });
      expect(await readSlot(file, { blocking: true })).toEqual({
        kind: "ok",
        record: { ...record, usage: oneModel },
      });
    });

    test("several models keep byModel; a slot written with byModel for one model reads as before", async () => {
      expect(body(encodeSlot({ ...record, usage: twoModels })).usage).toEqual(twoModels);
      expect(decodeSlot(encodeSlot({ ...record, usage: twoModels }).toString())).toEqual({
        ok: true,
        record: { ...record, usage: twoModels },
      });
      const json = JSON.stringify({ ...record, usage: oneModel });
      const earlier = `${createHash("sha1").update(json).digest("hex")} ${json}`;
      expect(decodeSlot(earlier)).toEqual({ ok: true, record: { ...record, usage: oneModel } });
    });

    test("a usage naming its models both ways, or neither, is damage", () => {
      for (const usage of [
        { ...oneModel, model: "mock/a" },
        { totals: oneModel.totals, countedAt },
      ]) {
        const json = JSON.stringify({ ...record, usage });
        const line = `${createHash("sha1").update(json).digest("hex")} ${json}`;
        expect(decodeSlot(line)).toEqual({ ok: false, problem: "schema mismatch" });
      }
    });
  });
});

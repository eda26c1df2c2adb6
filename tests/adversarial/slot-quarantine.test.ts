import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { encodeSlot, readSlot, writeSlot } from "../../src/state/heartbeat-slot.ts";

test("a slot rewritten in a tight loop by another process is never moved aside by a reader", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-slot-"));
  try {
    const slot = path.join(dir, "agent.hb");
    const stop = path.join(dir, "stop");
    const writer = Bun.spawn(
      [process.execPath, path.join(import.meta.dir, "fixtures", "slot-writer.ts"), slot, stop],
      { stdout: "pipe", stderr: "inherit" },
    );
    while (!existsSync(slot)) await Bun.sleep(1);
    const seen = { ok: 0, corrupt: 0, missing: 0 };
    const until = Date.now() + 3_000;
    while (Date.now() < until) seen[(await readSlot(slot)).kind]++;
    await writeFile(stop, "");
    const writes = Number(await new Response(writer.stdout).text());
    expect(await writer.exited).toBe(0);
    console.log(`slot reads: ${JSON.stringify(seen)} against ${writes} writes`);
    expect(writes).toBeGreaterThan(1_000);
    expect(seen.corrupt).toBe(0);
    expect((await readdir(dir)).filter((name) => name.includes(".corrupt-"))).toEqual([]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 30_000);

test("a slot caught mid-write by a writer that needs a few ms to finish is read, not moved aside", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-slot-"));
  try {
    const slot = path.join(dir, "agent.hb");
    const record = {
      version: 1 as const,
      heartbeatTs: new Date().toISOString(),
      source: "tool" as const,
      updates: 1,
    };
    // A write torn halfway: the new record's first half over the old one's second half.
    const whole = encodeSlot(record);
    const torn = Buffer.concat([whole.subarray(0, 40), encodeSlot({ ...record, updates: 7 }).subarray(40)]);
    await writeFile(slot, torn);
    // The writer is descheduled mid-write and finishes 3 ms later.
    setTimeout(() => writeSlot(slot, record), 3);
    const read = await readSlot(slot);
    expect(read.kind).toBe("ok");
    expect((await readdir(dir)).filter((name) => name.includes(".corrupt-"))).toEqual([]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

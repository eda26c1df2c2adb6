import { afterEach, beforeEach, expect, test } from "bun:test";
import { renameSync, writeFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { z } from "zod";
import { quarantine, readJson } from "../../src/state/store.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-quarantine-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const Schema = z.object({ version: z.literal(1), value: z.number() });
const DAMAGED = '{"version": 1, "value": 4';
const VALID = `${JSON.stringify({ version: 1, value: 5 })}\n`;

/** Runs `writer` once, right after a reader has read the damaged text and before it can act on it. */
function writeRightAfterDamagedRead(writer: () => void): () => void {
  const realParse = JSON.parse;
  let done = false;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (!done && text === DAMAGED) {
      done = true;
      writer();
    }
    return realParse(text, reviver);
  }) as typeof JSON.parse;
  return () => {
    JSON.parse = realParse;
  };
}

test("a valid file written (by rename) between the damaged read and the quarantine is left in place and read", async () => {
  const file = path.join(dir, "state.json");
  await writeFile(file, DAMAGED);
  const restore = writeRightAfterDamagedRead(() => {
    writeFileSync(`${file}.tmp`, VALID);
    renameSync(`${file}.tmp`, file);
  });
  let read: Awaited<ReturnType<typeof readJson>>;
  try {
    read = await readJson(file, Schema);
  } finally {
    restore();
  }
  expect(await readFile(file, "utf8")).toBe(VALID);
  expect(read).toEqual({ kind: "ok", value: { version: 1, value: 5 } });
  expect((await readdir(dir)).filter((name) => name.includes(".corrupt-"))).toEqual([]);
});

test("a damaged file nobody rewrote is still moved aside, bytes intact, with a warning", async () => {
  const file = path.join(dir, "state.json");
  await writeFile(file, DAMAGED);
  const read = await readJson(file, Schema);
  expect(read.kind).toBe("corrupt");
  const aside = (await readdir(dir)).filter((name) => name.includes(".corrupt-"));
  expect(aside).toHaveLength(1);
  expect(await readFile(path.join(dir, aside[0] as string), "utf8")).toBe(DAMAGED);
  if (read.kind === "corrupt") expect(read.warning).toContain("moved aside to state.json.corrupt-");
});

test("two damaged versions of one file moved aside in the same millisecond are both kept", async () => {
  const file = path.join(dir, "state.json");
  const at = new Date("2026-01-01T00:00:00.000Z");
  await writeFile(file, "first damage");
  expect((await quarantine(file, "first damage", at)).kind).toBe("moved");
  await writeFile(file, "second damage");
  expect((await quarantine(file, "second damage", at)).kind).toBe("moved");
  const aside = (await readdir(dir)).filter((name) => name.includes(".corrupt-")).sort();
  expect(aside).toHaveLength(2);
  const kept = await Promise.all(aside.map((name) => readFile(path.join(dir, name), "utf8")));
  expect(kept.sort()).toEqual(["first damage", "second damage"]);
});

import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { StatCache } from "../../src/state/stat-cache.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-statcache-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

function counted(file: string) {
  let reads = 0;
  return {
    read: async () => {
      reads++;
      return Bun.file(file).text();
    },
    get reads() {
      return reads;
    },
  };
}

test("an unchanged, settled file is read once; a change in place (same size) is seen", async () => {
  const file = path.join(dir, "a.json");
  await writeFile(file, "one");
  await Bun.sleep(150);
  const cache = new StatCache<string>();
  const reader = counted(file);
  expect(await cache.get(file, reader.read)).toBe("one");
  expect(await cache.get(file, reader.read)).toBe("one");
  expect(reader.reads).toBe(1);

  const handle = await open(file, "r+");
  await handle.write("two", 0);
  await handle.close();
  expect(await cache.get(file, reader.read)).toBe("two");
  expect(reader.reads).toBe(2);
});

test("a file that changed moments ago is never trusted, so two quick writes cannot hide behind one mtime", async () => {
  const file = path.join(dir, "b.json");
  const cache = new StatCache<string>();
  const reader = counted(file);
  await writeFile(file, "aaa");
  expect(await cache.get(file, reader.read)).toBe("aaa");
  await writeFile(file, "bbb");
  expect(await cache.get(file, reader.read)).toBe("bbb");
  expect(await cache.get(file, reader.read)).toBe("bbb");
  expect(reader.reads).toBe(3);
});

test("a replaced or deleted file is read again", async () => {
  const file = path.join(dir, "c.json");
  await writeFile(file, "old");
  await Bun.sleep(150);
  const cache = new StatCache<string>();
  const reader = counted(file);
  await cache.get(file, reader.read);
  await writeFile(`${file}.tmp`, "new");
  await Bun.write(file, Bun.file(`${file}.tmp`));
  expect(await cache.get(file, reader.read)).toBe("new");
  await rm(file);
  expect(await cache.get(file, async () => "missing")).toBe("missing");
});

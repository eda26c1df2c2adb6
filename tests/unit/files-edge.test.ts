import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { localFiles } from "../../src/edges/files.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-files-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test("kind follows symlinks unless told not to; a dangling link is something only to lstat", async () => {
  await mkdir(path.join(dir, "d"));
  await writeFile(path.join(dir, "f"), "x");
  await symlink(path.join(dir, "d"), path.join(dir, "to-d"));
  await symlink(path.join(dir, "nowhere"), path.join(dir, "dangling"));
  expect(await localFiles.kind(path.join(dir, "d"))).toBe("directory");
  expect(await localFiles.kind(path.join(dir, "f"))).toBe("file");
  expect(await localFiles.kind(path.join(dir, "to-d"))).toBe("directory");
  expect(await localFiles.kind(path.join(dir, "to-d"), { follow: false })).toBe("other");
  expect(await localFiles.kind(path.join(dir, "dangling"))).toBeUndefined();
  expect(await localFiles.kind(path.join(dir, "dangling"), { follow: false })).toBe("other");
  expect(await localFiles.kind(path.join(dir, "missing"))).toBeUndefined();
});

test("remove takes a file away and accepts nothing there; realpath resolves links", async () => {
  await writeFile(path.join(dir, "f"), "x");
  await localFiles.remove(path.join(dir, "f"));
  await localFiles.remove(path.join(dir, "f"));
  expect(await localFiles.kind(path.join(dir, "f"))).toBeUndefined();
  await mkdir(path.join(dir, "d"));
  await symlink(path.join(dir, "d"), path.join(dir, "to-d"));
  expect(await localFiles.realpath(path.join(dir, "to-d"))).toBe(
    await localFiles.realpath(path.join(dir, "d")),
  );
});

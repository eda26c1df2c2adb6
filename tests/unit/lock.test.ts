import { afterEach, beforeEach, expect, test } from "bun:test";
import { lstatSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { LockTimeoutError, withFileLock } from "../../src/state/lock.ts";
import { lockExists, lockOwner, setLockTime } from "../helpers/locks.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-lock-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test("holders of one lock never overlap, and every one gets its turn", async () => {
  const file = path.join(dir, "state.json");
  let inside = 0;
  let most = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: 20 }, () =>
      withFileLock(file, async () => {
        inside++;
        most = Math.max(most, inside);
        await Bun.sleep(1);
        inside--;
        done++;
      }),
    ),
  );
  expect(most).toBe(1);
  expect(done).toBe(20);
  expect(lockExists(`${file}.lock`)).toBe(false);
});

test("the lock is a symbolic link next to the locked one holding its owner's token, created with the parent directories", async () => {
  const file = path.join(dir, "a", "b", "state.json");
  await withFileLock(file, async () => {
    expect(lstatSync(`${file}.lock`).isSymbolicLink()).toBe(true);
    expect(lockOwner(`${file}.lock`)).toMatch(new RegExp(`^${process.pid} ${hostname()} [0-9a-f]{16}$`));
  });
  expect(lockExists(`${file}.lock`)).toBe(false);
});

test("released when fn throws", async () => {
  const file = path.join(dir, "state.json");
  await expect(withFileLock(file, async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
  expect(await withFileLock(file, async () => "again")).toBe("again");
});

test("a lock left by a crashed holder is taken over once stale: file, link or old-style directory", async () => {
  const old = new Date(Date.now() - 60_000);
  const fileLock = path.join(dir, "one.json");
  await writeFile(`${fileLock}.lock`, "");
  await utimes(`${fileLock}.lock`, old, old);
  expect(await withFileLock(fileLock, async () => 1, { staleMs: 1_000, maxWaitMs: 2_000 })).toBe(1);
  const linkLock = path.join(dir, "three.json");
  await symlink("1 other-host.example crashed", `${linkLock}.lock`);
  await setLockTime(`${linkLock}.lock`, old);
  expect(await withFileLock(linkLock, async () => 3, { staleMs: 1_000, maxWaitMs: 2_000 })).toBe(3);
  const dirLock = path.join(dir, "two.json");
  await mkdir(`${dirLock}.lock`);
  await utimes(`${dirLock}.lock`, old, old);
  expect(await withFileLock(dirLock, async () => 2, { staleMs: 1_000, maxWaitMs: 2_000 })).toBe(2);
});

test("a fresh lock held by someone else times out with LockTimeoutError", async () => {
  const file = path.join(dir, "state.json");
  await writeFile(`${file}.lock`, "");
  await expect(withFileLock(file, async () => 1, { staleMs: 10_000, maxWaitMs: 100 })).rejects.toBeInstanceOf(
    LockTimeoutError,
  );
});

test("a long holder keeps its lock fresh past six stale times (the most a live owner's lock may reach), by the link's own time", async () => {
  const file = path.join(dir, "state.json");
  const timing = { staleMs: 100, maxWaitMs: 5_000 };
  const order: string[] = [];
  let ageSeen = Number.POSITIVE_INFINITY;
  const long = withFileLock(
    file,
    async () => {
      await Bun.sleep(1_000);
      ageSeen = Date.now() - lstatSync(`${file}.lock`).mtimeMs;
      order.push("long");
    },
    timing,
  );
  await Bun.sleep(50);
  await withFileLock(file, async () => order.push("second"), timing);
  await long;
  expect(order).toEqual(["long", "second"]);
  expect(ageSeen).toBeLessThan(200);
});

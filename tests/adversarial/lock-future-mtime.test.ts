import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { LockTimeoutError, withFileLock } from "../../src/state/lock.ts";

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "oct-lock-future-"));
  file = path.join(dir, "state.json");
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** The default staleness (10 s), but a wait far shorter: a lock that is not judged abandoned at once times out. */
const SHORT_WAIT = { maxWaitMs: 1_500 };

async function leaveLock(owner: string, mtime: Date): Promise<void> {
  await writeFile(`${file}.lock`, owner);
  await utimes(`${file}.lock`, mtime, mtime);
}

async function deadPid(): Promise<number> {
  const child = Bun.spawn(["true"]);
  await child.exited;
  return child.pid;
}

test("a lock whose mtime is minutes in the future (clock stepped back) is taken over at once", async () => {
  await leaveLock(`${process.pid} ${hostname()} abc`, new Date(Date.now() + 10 * 60_000));
  expect(await withFileLock(file, async () => "in", SHORT_WAIT)).toBe("in");
});

test("a fresh lock whose owner process on this host is gone is taken over at once", async () => {
  await leaveLock(`${await deadPid()} ${hostname()} abc`, new Date());
  expect(await withFileLock(file, async () => "in", SHORT_WAIT)).toBe("in");
});

test("a fresh lock of a live owner, or of an owner on another host, is waited for", async () => {
  await leaveLock(`${process.pid} ${hostname()} abc`, new Date());
  await expect(withFileLock(file, async () => "in", { maxWaitMs: 300 })).rejects.toBeInstanceOf(
    LockTimeoutError,
  );
  await leaveLock(`${await deadPid()} another-host.example abc`, new Date());
  await expect(withFileLock(file, async () => "in", { maxWaitMs: 300 })).rejects.toBeInstanceOf(
    LockTimeoutError,
  );
});

test("an mtime a little ahead (within the 2 s skew) still counts as fresh", async () => {
  await leaveLock(`${process.pid} ${hostname()} abc`, new Date(Date.now() + 1_000));
  await expect(withFileLock(file, async () => "in", { maxWaitMs: 300 })).rejects.toBeInstanceOf(
    LockTimeoutError,
  );
});

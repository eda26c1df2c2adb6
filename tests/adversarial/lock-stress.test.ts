import { expect, test } from "bun:test";
import { mkdtemp, readFile, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { withFileLock } from "../../src/state/lock.ts";
import { lockExists, setLockTime } from "../helpers/locks.ts";

const PROCESSES = 4;
const ROUNDS = 500;

test(`${PROCESSES} processes x ${ROUNDS} rounds on a lock left stale by every holder: never two holders at once`, async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-stress-"));
  try {
    const file = path.join(dir, "state.json");
    const goFile = path.join(dir, "go");
    const script = path.join(import.meta.dir, "fixtures", "lock-stress-worker.ts");
    const children = Array.from({ length: PROCESSES }, () =>
      Bun.spawn([process.execPath, script, file, String(ROUNDS), goFile], {
        stdout: "pipe",
        stderr: "inherit",
      }),
    );
    await Bun.sleep(300);
    await writeFile(goFile, "");
    const outputs = await Promise.all(children.map((child) => new Response(child.stdout).text()));
    expect(await Promise.all(children.map((child) => child.exited))).toEqual(Array(PROCESSES).fill(0));
    const results = outputs.map(
      (out) => JSON.parse(out) as { violations: number; takeovers: number; stolen: number },
    );
    const violations = results.reduce((sum, r) => sum + r.violations, 0);
    const takeovers = results.reduce((sum, r) => sum + r.takeovers, 0);
    const stolen = results.reduce((sum, r) => sum + r.stolen, 0);
    console.log(
      `lock stress: ${takeovers} takeovers, ${violations} violations, ${stolen} locks removed under their holder`,
    );
    expect(violations).toBe(0);
    expect(stolen).toBe(0);
    expect(Number(await readFile(`${file}.count`, "utf8"))).toBe(PROCESSES * ROUNDS);
    // The attack really ran: most rounds ended in a takeover by a waiter.
    expect(takeovers).toBeGreaterThan(1_500);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 60_000);

test("a holder whose lock was taken over (it stalled past staleMs) leaves the taker's lock alone on release", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-owner-"));
  try {
    const file = path.join(dir, "state.json");
    const lock = `${file}.lock`;
    const past = new Date(Date.now() - 3_600_000);
    let letTakerGo = () => {};
    const takerMayLeave = new Promise<void>((resolve) => {
      letTakerGo = resolve;
    });
    let takerInside = () => {};
    const takerIn = new Promise<void>((resolve) => {
      takerInside = resolve;
    });
    let taker: Promise<unknown> = Promise.resolve();
    await withFileLock(file, async () => {
      await setLockTime(lock, past);
      taker = withFileLock(file, async () => {
        takerInside();
        await takerMayLeave;
      });
      await takerIn;
    });
    // The first holder has released: the taker's lock must still be there, or a third locker would get in.
    expect(lockExists(lock)).toBe(true);
    await expect(withFileLock(file, async () => "third", { maxWaitMs: 200 })).rejects.toThrow("Timed out");
    letTakerGo();
    await taker;
    expect(lockExists(lock)).toBe(false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the takeover guard of a live taker (stalled inside it past staleMs) is never broken by its age", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-guard-"));
  try {
    const file = path.join(dir, "state.json");
    const lock = `${file}.lock`;
    const old = new Date(Date.now() - 2_000);
    // A stale lock, and the guard of a taker that is alive (this process) and has sat inside it for 2 x staleMs.
    await writeFile(lock, "1 other-host.example dead");
    await utimes(lock, new Date(0), new Date(0));
    await writeFile(`${lock}.takeover`, `${process.pid} ${hostname()} stalled`);
    await utimes(`${lock}.takeover`, old, old);
    // Breaking it would let a second taker into the guard beside the stalled one: two takers, two holders.
    await expect(withFileLock(file, async () => "in", { staleMs: 1_000, maxWaitMs: 500 })).rejects.toThrow(
      "Timed out",
    );
    expect(await readFile(`${lock}.takeover`, "utf8")).toBe(`${process.pid} ${hostname()} stalled`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the takeover guard of a dead taker is broken at once, and the stale lock is taken over", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-guard-dead-"));
  try {
    const file = path.join(dir, "state.json");
    const lock = `${file}.lock`;
    const child = Bun.spawn(["true"]);
    await child.exited;
    await writeFile(lock, `${child.pid} ${hostname()} crashed`);
    await writeFile(`${lock}.takeover`, `${child.pid} ${hostname()} crashed-too`);
    expect(await withFileLock(file, async () => "in", { maxWaitMs: 1_500 })).toBe("in");
    expect(lockExists(`${lock}.takeover`)).toBe(false);
    // The same left as links, the kind this version makes.
    await symlink(`${child.pid} ${hostname()} crashed`, lock);
    await symlink(`${child.pid} ${hostname()} crashed-too`, `${lock}.takeover`);
    expect(await withFileLock(file, async () => "in again", { maxWaitMs: 1_500 })).toBe("in again");
    expect(lockExists(`${lock}.takeover`)).toBe(false);
    expect(lockExists(lock)).toBe(false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a holder that stalls for more than half the stale time keeps its lock: nobody gets in beside it", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-stall-"));
  try {
    const file = path.join(dir, "state.json");
    const timing = { staleMs: 400, maxWaitMs: 5_000 };
    let inside = 0;
    let overlaps = 0;
    const enter = async (hold: () => Promise<void>) => {
      inside++;
      if (inside > 1) overlaps++;
      await hold();
      inside--;
    };
    const holder = withFileLock(
      file,
      () =>
        enter(async () => {
          // A GC pause or a loaded machine: the event loop (and the refresher) stands still for 300 ms.
          Bun.sleepSync(300);
          await Bun.sleep(900);
        }),
      timing,
    );
    await Bun.sleep(20);
    const waiter = withFileLock(file, () => enter(async () => {}), timing);
    await Promise.all([holder, waiter]);
    expect(overlaps).toBe(0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

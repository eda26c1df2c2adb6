import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { withFileLock } from "../../src/state/lock.ts";

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
      await utimes(lock, past, past);
      taker = withFileLock(file, async () => {
        takerInside();
        await takerMayLeave;
      });
      await takerIn;
    });
    // The first holder has released: the taker's lock must still be there, or a third locker would get in.
    expect(existsSync(lock)).toBe(true);
    await expect(withFileLock(file, async () => "third", { maxWaitMs: 200 })).rejects.toThrow("Timed out");
    letTakerGo();
    await taker;
    expect(existsSync(lock)).toBe(false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

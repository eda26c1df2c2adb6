import { expect, test } from "bun:test";
import { existsSync, lstatSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { withFileLock } from "../../src/state/lock.ts";
import { CONTEND_ROUNDS, contend } from "../helpers/locks.ts";

/** How often the holder changed from one process to the other, each way: "PPCPC" -> { toChild: 2, toParent: 1 }. */
function handoffs(order: string): { toChild: number; toParent: number } {
  let toChild = 0;
  let toParent = 0;
  for (let i = 1; i < order.length; i++) {
    if (order[i - 1] === "P" && order[i] === "C") toChild++;
    if (order[i - 1] === "C" && order[i] === "P") toParent++;
  }
  return { toChild, toParent };
}

test("a process whose file system refuses links locks with files, and still excludes a process locking with links", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-kinds-"));
  try {
    const file = path.join(dir, "state.json");
    const child = Bun.spawn(
      [process.execPath, "test", path.join(import.meta.dir, "fixtures", "lock-without-links.ts")],
      { env: { ...process.env, LOCK_FILE: file }, stdout: "pipe", stderr: "pipe" },
    );
    // Both start together: the child has its locks as files once it says it is ready.
    for (let waited = 0; !existsSync(`${file}.ready`) && waited < 30_000; waited += 5) await Bun.sleep(5);
    writeFileSync(`${file}.go`, "");
    let links = 0;
    const violations = await contend(withFileLock, file, "P", () => {
      if (lstatSync(`${file}.lock`).isSymbolicLink()) links++;
    });
    const [code, report] = await Promise.all([child.exited, new Response(child.stderr).text()]);
    expect({ code, passed: report.includes(" 1 pass") }).toEqual({ code: 0, passed: true });
    expect(links).toBe(CONTEND_ROUNDS);
    expect(violations).toBe(0);
    expect(Number(readFileSync(`${file}.count`, "utf8"))).toBe(2 * CONTEND_ROUNDS);
    // They really took turns: the lock went from a link's holder to a file's holder and back many times.
    const { toChild, toParent } = handoffs(readFileSync(`${file}.order`, "utf8"));
    expect(Math.min(toChild, toParent)).toBeGreaterThan(50);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 90_000);

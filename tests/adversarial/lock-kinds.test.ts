import { expect, test } from "bun:test";
import { closeSync, lstatSync, openSync } from "node:fs";
import { mkdtemp, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { withFileLock } from "../../src/state/lock.ts";

const ROUNDS = 300;

test("a process whose file system refuses links locks with files, and still excludes a process locking with links", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "oct-lock-kinds-"));
  try {
    const file = path.join(dir, "state.json");
    const goFile = path.join(dir, "go");
    const child = Bun.spawn(
      [process.execPath, "test", path.join(import.meta.dir, "fixtures", "lock-without-links.ts")],
      {
        env: { ...process.env, LOCK_FILE: file, LOCK_ROUNDS: String(ROUNDS), LOCK_GO: goFile },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    await Bun.sleep(300);
    await writeFile(goFile, "");
    let violations = 0;
    let links = 0;
    for (let round = 0; round < ROUNDS; round++) {
      await withFileLock(file, async () => {
        if (lstatSync(`${file}.lock`).isSymbolicLink()) links++;
        try {
          closeSync(openSync(`${file}.inside`, "wx"));
        } catch {
          violations++;
        }
        const count = Number(await readFile(`${file}.count`, "utf8").catch(() => "0"));
        await Bun.sleep(0);
        await writeFile(`${file}.count`, String(count + 1));
        await unlink(`${file}.inside`).catch(() => {});
      });
    }
    const [code, report] = await Promise.all([child.exited, new Response(child.stderr).text()]);
    expect({ code, passed: report.includes(" 1 pass") }).toEqual({ code: 0, passed: true });
    expect(links).toBe(ROUNDS);
    expect(violations).toBe(0);
    expect(Number(await readFile(`${file}.count`, "utf8"))).toBe(2 * ROUNDS);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 90_000);

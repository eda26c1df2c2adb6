import {
  appendFileSync,
  closeSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { lutimes } from "node:fs/promises";

/**
 * A lock as the store makes it (a symbolic link whose target is its owner's token) or as an older version or a file
 * system without links leaves it (a file holding the token). None of these follows the link: its target is a token,
 * not a file.
 */
export function lockExists(lock: string): boolean {
  return lstatSync(lock, { throwIfNoEntry: false }) !== undefined;
}

/** The lock's owner token; "" when there is no lock (or it has no token, or went between the two calls). */
export function lockOwner(lock: string): string {
  try {
    const info = lstatSync(lock);
    if (info.isSymbolicLink()) return readlinkSync(lock);
    return info.isFile() ? readFileSync(lock, "utf8") : "";
  } catch {
    return "";
  }
}

/** Set the lock's own mtime, as a holder's refresh does (or a crash long ago left it). */
export function setLockTime(lock: string, when: Date): Promise<void> {
  return lutimes(lock, when, when);
}

export const CONTEND_ROUNDS = 300;

/**
 * Take the lock on `file` CONTEND_ROUNDS times as one of several processes: inside, prove it is alone (an O_EXCL
 * marker), bump a shared counter after a turn of the event loop, and append `tag` to a shared record of the order the
 * holders came in; outside, pause a millisecond or two so the others get their turns. Returns how many times it was
 * not alone. `inside` runs first in each round (checks of the lock itself).
 */
export async function contend(
  withLock: <T>(file: string, fn: () => Promise<T>) => Promise<T>,
  file: string,
  tag: string,
  inside: () => void = () => {},
): Promise<number> {
  let violations = 0;
  for (let round = 0; round < CONTEND_ROUNDS; round++) {
    await withLock(file, async () => {
      inside();
      try {
        closeSync(openSync(`${file}.inside`, "wx"));
      } catch {
        violations++;
      }
      const count = Number(readFileSync(`${file}.count`, { encoding: "utf8", flag: "a+" }) || "0");
      await Bun.sleep(0);
      writeFileSync(`${file}.count`, String(count + 1));
      appendFileSync(`${file}.order`, tag);
      rmSync(`${file}.inside`, { force: true });
    });
    await Bun.sleep(1 + Math.random());
  }
  return violations;
}

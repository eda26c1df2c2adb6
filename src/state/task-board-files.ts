// The file work of the task board's store (task-board-store.ts): the stats that key its cache, and the few reads and
// writes of the journal done with blocking calls, each microseconds where a round trip through the thread pool costs
// tens. See specs/storage.md ("The task board's journal").
import {
  type BigIntStats,
  closeSync,
  fdatasync,
  fstatSync,
  ftruncateSync,
  openSync,
  readSync,
  statSync,
  writeSync,
} from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { PRIVATE_FILE_MODE } from "./modes.ts";

const datasync = promisify(fdatasync);

/** As StatCache's: a file changed less than this long ago may change again within the same mtime tick. */
const SETTLE_MS = 100;

export interface BoardFiles {
  board: string;
  journal: string;
}

/** The two files' stats as one cache key, and whether both are old enough to be trusted (see SETTLE_MS). */
export interface Signature {
  board: string;
  journal: string;
  settled: boolean;
}

export function statOf(file: string): BigIntStats | undefined {
  return statSync(file, { bigint: true, throwIfNoEntry: false });
}

export function keyOf(info: BigIntStats | undefined): string {
  return info ? `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}` : "-";
}

/** The file a stat key names (device and inode), whatever its size and times. */
export function inodeOf(key: string): string {
  return key.split(":", 2).join(":");
}

function settledAt(info: BigIntStats | undefined, now: number): boolean {
  return !info || now - Number(info.mtimeMs) > SETTLE_MS;
}

/** Blocking stats: two of them cost microseconds. */
export function signatureOf(files: BoardFiles): Signature {
  const board = statOf(files.board);
  const journal = statOf(files.journal);
  const now = Date.now();
  return {
    board: keyOf(board),
    journal: keyOf(journal),
    settled: settledAt(board, now) && settledAt(journal, now),
  };
}

/** A file's bytes, none when it is missing. */
export async function readBytes(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return Buffer.alloc(0);
    throw error;
  }
}

/**
 * The journal's bytes from `end` on, if it still starts with `header` and is no shorter; undefined when it is gone,
 * shorter, another generation's, or changed size while read.
 */
export function appendedSince(journal: string, header: string, end: number): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(journal, "r");
  } catch {
    return undefined;
  }
  try {
    const expected = Buffer.from(header);
    const head = Buffer.alloc(expected.length);
    const size = Number(fstatSync(fd).size);
    if (size < end || readSync(fd, head, 0, head.length, 0) !== head.length || !head.equals(expected)) {
      return undefined;
    }
    const tail = Buffer.alloc(size - end);
    return readSync(fd, tail, 0, tail.length, end) === tail.length ? tail : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * `bytes` appended to the journal (after cutting it at `cutAt`, a torn append a crash left) and flushed; its stat
 * after. Appended (O_APPEND), not written at a position: a writer that stalled past the lock's takeover and resumes
 * adds its record after the newer ones rather than over them.
 */
export async function appendFlushed(
  journal: string,
  bytes: Buffer,
  cutAt: number | undefined,
): Promise<BigIntStats> {
  const fd = openSync(journal, "a");
  try {
    if (cutAt !== undefined) ftruncateSync(fd, cutAt);
    writeSync(fd, bytes);
    await datasync(fd);
    return fstatSync(fd, { bigint: true });
  } finally {
    closeSync(fd);
  }
}

let keptAsideSeq = 0;

/** A copy of a journal that could not be used whole, beside it under the name doctor lists damaged files by. */
export async function keepAside(file: string, bytes: Buffer): Promise<string> {
  keptAsideSeq += 1;
  const copy = `${file}.corrupt-${new Date().toISOString().replace(/[:.]/g, "-")}-${process.pid}-${keptAsideSeq}`;
  await writeFile(copy, bytes, { flag: "wx", mode: PRIVATE_FILE_MODE });
  return path.basename(copy);
}

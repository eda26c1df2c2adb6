/**
 * The floors: the least work any implementation must do for a figure, written with the bare primitives (node:fs and
 * Bun.file, as the store uses them) and none of the code under test, so a faster or slower store moves the figure
 * and not its floor.
 */
import { closeSync, constants, openSync, unlinkSync, writeFileSync } from "node:fs";
import { open, readdir, readFile, rename, stat } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Same size as the store's heartbeat slot: the floor writes as many bytes in place. */
const SLOT_BYTES = 16 * 1024;
/** The head a slot reader needs for a record without metadata. */
const SLOT_HEAD = 2048;

/**
 * Run the figure's round and the floor's round by turns, swapping which goes first, so a busy moment hits both;
 * `pauseMs` after each pair spreads the pairs over a longer stretch of the machine's time.
 */
export async function interleaved(
  rounds: number,
  subject: (round: number) => Promise<void>,
  floor: (round: number) => Promise<void>,
  pauseMs = 0,
): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      await subject(round);
      await floor(round);
    } else {
      await floor(round);
      await subject(round);
    }
    if (pauseMs > 0) await sleep(pauseMs);
  }
}

/**
 * Run the figure's round and the floor's round at once, round after round: where a round lasts long enough for the
 * machine to change under it (seconds of other processes booting), taking turns leaves each side a different moment,
 * and only starting both together makes them meet the same one. The floor's round is started first, so that where
 * the two queue for the same server, the wait is the figure's to pay, never the floor's.
 */
export async function together(
  rounds: number,
  subject: (round: number) => Promise<void>,
  floor: (round: number) => Promise<void>,
): Promise<void> {
  for (let round = 0; round < rounds; round++) await Promise.all([floor(round), subject(round)]);
}

/** A 16 KiB slot image whose head changes on every write (a fresh timestamp), like a heartbeat record's. */
function slotImage(): Buffer {
  const image = Buffer.alloc(SLOT_BYTES, 0x20);
  image.write(`{"heartbeatTs":"${new Date().toISOString()}"}`);
  return image;
}

/** One in-place write of a whole slot, no fsync: the heartbeat's durability. */
export async function bareSlotWrite(file: string): Promise<void> {
  // One blocking call, open (never truncated), write at 0, close: the store's own primitive; the first write creates.
  try {
    writeFileSync(file, slotImage(), { flag: "r+" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    writeFileSync(file, slotImage(), { mode: 0o644 });
  }
}

/** The floor's lock: an empty file created with O_EXCL, which throws EEXIST when the file is there. */
export function createEmptyExclusive(file: string): void {
  closeSync(openSync(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o644));
}

/**
 * The same write under the least cross-process lock there is: an O_EXCL lock file created, the slot written, the lock
 * file removed; a taken lock is retried after a short sleep. No stale-lock takeover, no refresh, no exit hook.
 */
export async function lockedSlotWrite(file: string): Promise<void> {
  const lock = `${file}.floorlock`;
  for (let delay = 0.25; ; delay = Math.min(delay * 2, 25)) {
    try {
      // Blocking calls, as the store's lock takes and gives back a free lock.
      createEmptyExclusive(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      await sleep(delay + Math.random() * delay);
    }
  }
  try {
    await bareSlotWrite(file);
  } finally {
    unlinkSync(lock);
  }
}

/** Parse a slot's record: the JSON after the checksum, up to the last brace. */
function parseSlotHead(bytes: Buffer): unknown {
  const end = bytes.lastIndexOf(0x7d);
  const text = bytes.toString("utf8", 0, end + 1);
  return JSON.parse(text.slice(text.indexOf(" ") + 1));
}

/** List the agents directory, then read and JSON-parse every agent file and the head of every slot, all at once. */
export async function readAndParseAll(dir: string): Promise<number> {
  const names = await readdir(dir);
  const parsed = await Promise.all(
    names.map(async (name) => {
      const file = path.join(dir, name);
      if (name.endsWith(".json")) return JSON.parse(await readFile(file, "utf8")) as unknown;
      if (name.endsWith(".hb"))
        return parseSlotHead(Buffer.from(await Bun.file(file).slice(0, SLOT_HEAD).arrayBuffer()));
      return undefined;
    }),
  );
  return parsed.filter((p) => p !== undefined).length;
}

/** List the agents directory and stat every agent file and slot: what noticing "nothing changed" takes. */
export async function statAll(dir: string): Promise<number> {
  const names = (await readdir(dir)).filter((n) => n.endsWith(".json") || n.endsWith(".hb"));
  await Promise.all(names.map((name) => stat(path.join(dir, name), { bigint: true })));
  return names.length;
}

/** One directory listing: what a sweep that remembers which agents are fresh must still do to see new ones. */
export async function listOnly(dir: string): Promise<number> {
  return (await readdir(dir)).length;
}

export interface FileSnapshot {
  /** path -> `ino:size:mtimeNs` */
  files: Map<string, string>;
}

async function walk(dir: string, out: Map<string, string>): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  await Promise.all(
    entries.map(async (entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return walk(file, out);
      if (!entry.isFile()) return;
      const info = await stat(file, { bigint: true }).catch(() => undefined);
      if (info) out.set(file, `${info.ino}:${info.size}:${info.mtimeNs}`);
    }),
  );
}

/** Every file under `root` with its inode, size and mtime. */
export async function snapshot(root: string): Promise<FileSnapshot> {
  const files = new Map<string, string>();
  await walk(root, files);
  return { files };
}

/**
 * What the code under test wrote between two snapshots: files created or replaced (new inode, size or mtime), with
 * their bytes now. Lock files and temporaries are not state and are left out.
 */
export async function writtenFiles(before: FileSnapshot, after: FileSnapshot): Promise<Buffer[]> {
  const changed = [...after.files].filter(
    ([file, sig]) => before.files.get(file) !== sig && !file.endsWith(".lock") && !file.endsWith(".tmp"),
  );
  return Promise.all(changed.map(([file]) => readFile(file)));
}

/**
 * Write each of `contents` durably as its own file in `dir` (temp file, write, fsync, rename), `concurrency` at a
 * time: the least a design that keeps each of those files durable must do.
 */
export async function durableReplaces(
  dir: string,
  contents: readonly Buffer[],
  concurrency = 32,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < contents.length) {
      const index = next++;
      const target = path.join(dir, `floor-${index}`);
      const temp = `${target}.tmp`;
      const handle = await open(temp, "w");
      try {
        await handle.writeFile(contents[index] as Buffer);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, target);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, contents.length) }, worker));
}

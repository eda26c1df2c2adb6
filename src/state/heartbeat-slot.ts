import { closeSync, linkSync, openSync, readSync, writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { removeNow } from "./lock-instance.ts";
import { makePrivateDirNow } from "./modes.ts";
import { type HeartbeatRecord, HeartbeatRecordSchema } from "./schemas.ts";
import { corruptWarning, quarantine, type ReadOptions, writeTempNow } from "./store.ts";
import { agentUsage, SlotUsageSchema, slotUsage } from "./usage-schema.ts";

/**
 * Heartbeats are the hottest write we have. Replacing a file by rename costs ~1.5 ms on ext4 (it forces a data
 * flush), so the liveness record is instead rewritten in place as one fixed-size write. A reader can still catch a
 * write half done, so every record carries a checksum of its body and a torn read is retried.
 * Durability is not needed here: losing the last heartbeat in a power cut only makes an agent look older.
 */
export const SLOT_SIZE = 16 * 1024;

/** SHA-1 through Bun's one-shot hasher: the same hex as node:crypto's, at a quarter of the cost (a sweep checks 1000). */
function checksum(body: string): string {
  return Bun.SHA1.hash(body, "hex");
}

/** A HeartbeatRecord as the slot holds it: its usage in the slot's form (see SlotUsageSchema). */
const SlotRecordSchema = HeartbeatRecordSchema.extend({ usage: SlotUsageSchema.optional() });
type SlotRecord = z.infer<typeof SlotRecordSchema>;

function heartbeatRecord(slot: SlotRecord): HeartbeatRecord {
  const { usage, ...rest } = slot;
  return usage ? { ...rest, usage: agentUsage(usage) } : rest;
}

/** A record checked against the schema and the line that holds it in a slot (checksum, space, JSON body). */
interface Encoded {
  line: string;
  record: HeartbeatRecord;
}

function encodeRecord(record: HeartbeatRecord): Encoded {
  const checked = SlotRecordSchema.parse(
    record.usage ? { ...record, usage: slotUsage(record.usage) } : record,
  );
  const body = JSON.stringify(checked);
  return { line: `${checksum(body)} ${body}`, record: heartbeatRecord(checked) };
}

/**
 * The one slot image every write fills: blank padding and a final newline, the record written over its start and
 * blanked again once written. Writes are blocking calls, so no two share it; a fresh 16 KiB image per heartbeat was
 * a sizeable share of a write's cost and of the garbage collector's work.
 */
const image = Buffer.alloc(SLOT_SIZE, 0x20);
image[SLOT_SIZE - 1] = 0x0a;

/** Run `use` with the slot image holding `line`; the image is blank again afterwards, whatever `use` does. */
function withSlotImage<T>(line: string, use: (slot: Buffer) => T): T {
  const bytes = Buffer.byteLength(line);
  if (bytes >= SLOT_SIZE)
    throw new RangeError(`heartbeat record of ${bytes} bytes exceeds the ${SLOT_SIZE}-byte slot`);
  image.write(line);
  try {
    return use(image);
  } finally {
    image.fill(0x20, 0, bytes);
  }
}

export function encodeSlot(record: HeartbeatRecord): Buffer {
  return withSlotImage(encodeRecord(record).line, (slot) => Buffer.from(slot));
}

/**
 * The line each slot held when this process last wrote it or read it whole and valid, with its record, by file. A
 * read that finds that very line again returns that record without checking the checksum, parsing and validating the
 * same text once more: the event monitor reads, under the agent's lock, the slot it wrote itself a moment before
 * (figure 5). Any other text (another process's write, a torn or damaged slot) is decoded and checked in full. The
 * records are shared by every reader, as the listings' StatCache shares its values: none changes one.
 */
const lastLines = new Map<string, Encoded>();
/** Slots remembered at most (an agent has one); the memory starts over when full. */
const LAST_LINES_MAX = 4_096;

function rememberLine(file: string, encoded: Encoded): void {
  if (lastLines.size >= LAST_LINES_MAX && !lastLines.has(file)) lastLines.clear();
  lastLines.set(file, encoded);
}

type Decoded = { ok: true; record: HeartbeatRecord } | { ok: false; problem: string };

export function decodeSlot(text: string): Decoded {
  const trimmed = text.trim();
  const space = trimmed.indexOf(" ");
  if (space <= 0) return { ok: false, problem: "no checksum" };
  const body = trimmed.slice(space + 1);
  if (checksum(body) !== trimmed.slice(0, space)) return { ok: false, problem: "checksum mismatch" };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { ok: false, problem: "invalid JSON" };
  }
  const parsed = SlotRecordSchema.safeParse(json);
  return parsed.success
    ? { ok: true, record: heartbeatRecord(parsed.data) }
    : { ok: false, problem: "schema mismatch" };
}

export type SlotRead =
  | { kind: "ok"; record: HeartbeatRecord }
  | { kind: "missing" }
  | { kind: "corrupt"; warning: string };

/** Most records (no or little metadata) fit here; reading the whole 16 KiB slot for each of 1000 agents adds up. */
const HEAD_BYTES = 2048;

function decodeUpToLastBrace(file: string, bytes: Buffer, length: number): Decoded {
  // Decode only up to the record's closing brace: turning the padding into a string and trimming it costs more than
  // the rest of the read.
  const end = bytes.subarray(0, length).lastIndexOf(0x7d);
  const text = bytes.toString("utf8", 0, end < 0 ? length : end + 1);
  const last = lastLines.get(file);
  if (last?.line === text) return { ok: true, record: last.record };
  const decoded = decodeSlot(text);
  if (decoded.ok) rememberLine(file, { line: text, record: decoded.record });
  return decoded;
}

/**
 * The head of the slot first; the whole slot only when the record does not check out within it. A prefix that ends
 * in a brace and matches the checksum can only be the whole record. (Bun.file's sliced read is measurably cheaper
 * here than a FileHandle's open/read/close.) Returns the bytes it decoded too: a failed decode read the whole slot.
 */
async function readRecord(file: string, options: ReadOptions): Promise<{ decoded: Decoded; bytes: Buffer }> {
  const head = options.blocking
    ? readBytesNow(file, HEAD_BYTES)
    : Buffer.from(await Bun.file(file).slice(0, HEAD_BYTES).arrayBuffer());
  const fromHead = decodeUpToLastBrace(file, head, head.length);
  if (fromHead.ok || head.length < HEAD_BYTES) return { decoded: fromHead, bytes: head };
  const whole = options.blocking
    ? readBytesNow(file, SLOT_SIZE)
    : Buffer.from(await Bun.file(file).arrayBuffer());
  return { decoded: decodeUpToLastBrace(file, whole, whole.length), bytes: whole };
}

/** Up to `length` bytes from the start of `file`, with blocking calls (see ReadOptions). */
function readBytesNow(file: string, length: number): Buffer {
  const fd = openSync(file, "r");
  try {
    const bytes = Buffer.allocUnsafe(length);
    return bytes.subarray(0, readSync(fd, bytes, 0, length, 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * Waits before each re-read of a slot that does not check out: a write in flight is over within microseconds, but
 * a writer descheduled mid-write on a loaded machine needs milliseconds.
 */
const TORN_READ_DELAYS_MS = [0, 1, 2, 5, 10];

export async function readSlot(file: string, options: ReadOptions = {}): Promise<SlotRead> {
  for (let reread = 0; ; reread++) {
    let problem = "";
    let bytes: Buffer = Buffer.alloc(0);
    for (const delay of TORN_READ_DELAYS_MS) {
      if (delay > 0) await sleep(delay);
      let read: Awaited<ReturnType<typeof readRecord>>;
      try {
        read = await readRecord(file, options);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "missing" };
        throw error;
      }
      if (read.decoded.ok) return { kind: "ok", record: read.decoded.record };
      problem = read.decoded.problem;
      bytes = read.bytes;
    }
    // Still bad after retries: not a write in flight but a damaged file (e.g. a crash mid-write). Moved aside only if
    // it still holds these very bytes: a writer at work would have changed them.
    const outcome = await quarantine(file, bytes);
    if (outcome.kind === "changed" && reread < 2) continue;
    return { kind: "corrupt", warning: corruptWarning(file, problem, outcome) };
  }
}

/** A new slot appears whole (temp file linked into place), never empty; one another writer made first is rewritten. */
function createSlot(file: string, slot: Buffer): void {
  makePrivateDirNow(path.dirname(file));
  const temp = writeTempNow(file, slot);
  try {
    linkSync(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    writeFileSync(file, slot, { flag: "r+" });
  } finally {
    removeNow(temp);
  }
}

/**
 * Overwrite the slot in place. Callers serialise writers with the agent's lock, and the write is a blocking call (16
 * KiB into the page cache, tens of microseconds) so that lock is held through no turn of the event loop.
 */
export function writeSlot(file: string, record: HeartbeatRecord): void {
  const encoded = encodeRecord(record);
  withSlotImage(encoded.line, (slot) => {
    try {
      // Opened without truncating: a reader never sees the slot shorter than whole.
      writeFileSync(file, slot, { flag: "r+" });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      createSlot(file, slot);
    }
  });
  rememberLine(file, encoded);
}

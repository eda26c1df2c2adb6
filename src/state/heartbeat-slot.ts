import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { makePrivateDir, PRIVATE_FILE_MODE } from "./modes.ts";
import { type HeartbeatRecord, HeartbeatRecordSchema } from "./schemas.ts";
import { quarantine } from "./store.ts";

/**
 * Heartbeats are the hottest write we have. Replacing a file by rename costs ~1.5 ms on ext4 (it forces a data
 * flush), so the liveness record is instead rewritten in place as one fixed-size write. A reader can still catch a
 * write half done, so every record carries a checksum of its body and a torn read is retried.
 * Durability is not needed here: losing the last heartbeat in a power cut only makes an agent look older.
 */
export const SLOT_SIZE = 16 * 1024;
const TORN_READ_RETRIES = 5;

function checksum(body: string): string {
  return createHash("sha1").update(body).digest("hex");
}

export function encodeSlot(record: HeartbeatRecord): Buffer {
  const body = JSON.stringify(HeartbeatRecordSchema.parse(record));
  const line = `${checksum(body)} ${body}`;
  const bytes = Buffer.byteLength(line);
  if (bytes >= SLOT_SIZE)
    throw new RangeError(`heartbeat record of ${bytes} bytes exceeds the ${SLOT_SIZE}-byte slot`);
  const slot = Buffer.alloc(SLOT_SIZE, 0x20);
  slot.write(line);
  slot[SLOT_SIZE - 1] = 0x0a;
  return slot;
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
  const parsed = HeartbeatRecordSchema.safeParse(json);
  return parsed.success ? { ok: true, record: parsed.data } : { ok: false, problem: "schema mismatch" };
}

export type SlotRead =
  | { kind: "ok"; record: HeartbeatRecord }
  | { kind: "missing" }
  | { kind: "corrupt"; warning: string };

/** Most records (no or little metadata) fit here; reading the whole 16 KiB slot for each of 1000 agents adds up. */
const HEAD_BYTES = 2048;

function decodeUpToLastBrace(bytes: Buffer, length: number): Decoded {
  // Decode only up to the record's closing brace: turning the padding into a string and trimming it costs more than
  // the rest of the read.
  const end = bytes.subarray(0, length).lastIndexOf(0x7d);
  return decodeSlot(bytes.toString("utf8", 0, end < 0 ? length : end + 1));
}

/**
 * The head of the slot first; the whole slot only when the record does not check out within it. A prefix that ends
 * in a brace and matches the checksum can only be the whole record. (Bun.file's sliced read is measurably cheaper
 * here than a FileHandle's open/read/close.)
 */
async function readRecord(file: string): Promise<Decoded> {
  const head = Buffer.from(await Bun.file(file).slice(0, HEAD_BYTES).arrayBuffer());
  const fromHead = decodeUpToLastBrace(head, head.length);
  if (fromHead.ok || head.length < HEAD_BYTES) return fromHead;
  const whole = Buffer.from(await Bun.file(file).arrayBuffer());
  return decodeUpToLastBrace(whole, whole.length);
}

export async function readSlot(file: string): Promise<SlotRead> {
  let problem = "";
  for (let attempt = 0; attempt < TORN_READ_RETRIES; attempt++) {
    let decoded: Decoded;
    try {
      decoded = await readRecord(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "missing" };
      throw error;
    }
    if (decoded.ok) return { kind: "ok", record: decoded.record };
    problem = decoded.problem;
  }
  // Still bad after retries: not a write in flight but a damaged file (e.g. a crash mid-write).
  const movedTo = await quarantine(file);
  const where = movedTo ? `moved aside to ${path.basename(movedTo)}` : "already moved aside";
  return { kind: "corrupt", warning: `${path.basename(file)} was damaged (${problem}) and ${where}` };
}

/** Overwrite the slot in place. Callers serialise writers with the agent's lock. */
export async function writeSlot(file: string, record: HeartbeatRecord): Promise<void> {
  const slot = encodeSlot(record);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, constants.O_RDWR | constants.O_CREAT, PRIVATE_FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    await makePrivateDir(path.dirname(file));
    handle = await open(file, constants.O_RDWR | constants.O_CREAT, PRIVATE_FILE_MODE);
  }
  try {
    await handle.write(slot, 0, SLOT_SIZE, 0);
  } finally {
    await handle.close();
  }
}

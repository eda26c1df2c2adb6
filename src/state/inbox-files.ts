import { open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { mapLimit } from "../map-limit.ts";
import type { Listed } from "./listed.ts";
import { type LockTiming, withFileLock } from "./lock.ts";
import { makePrivateDir } from "./modes.ts";
import { type InboxMessage, InboxMessageSchema } from "./schemas.ts";
import {
  corruptWarning,
  listDir,
  parseJson,
  quarantine,
  type ReadResult,
  readJson,
  writeJson,
} from "./store.ts";

/**
 * An inbox message with the file it was read from (its place: pending, delivered or read). Markings go to that file:
 * its name need not match the content (a file restored from a backup or copied by hand), and a path rebuilt from the
 * content would find nothing.
 */
export type FiledMessage = InboxMessage & { file: string };

/**
 * An inbox's messages live in three places by what became of them: its own directory holds those that reached no one
 * yet, `delivered/` those put into the recipient's session and not read, `read/` those read-messages returned. A
 * message only moves forward (a read one never changes again, a delivered one only gets read), so what needs the
 * pending ones (a notice flush, the sweep, a resume's hand-over) lists and reads the inbox's own directory, and what
 * counts the others (`status`) lists names, whatever the number of old messages.
 */
export type InboxArea = "delivered" | "read";

export function areaDir(inboxDir: string, area: InboxArea): string {
  return path.join(inboxDir, area);
}

/** The path a message file has while it waits (its lock's path, whichever place it is in now). */
export function pendingPathOf(file: string): string {
  const dir = path.dirname(file);
  // Inbox directories are named by agent id (a uuid): a directory named like an area is one.
  const inArea = ["delivered", "read"].includes(path.basename(dir));
  return inArea ? path.join(path.dirname(dir), path.basename(file)) : file;
}

/** Where a message belongs by its marks. */
function placeOf(pending: string, message: InboxMessage): string {
  const area = message.readAt ? "read" : message.deliveredAt ? "delivered" : undefined;
  return area ? path.join(areaDir(path.dirname(pending), area), path.basename(pending)) : pending;
}

/** Move a message file where its marks say it belongs (under its lock); a no-op when it is there. */
async function settle(file: string, message: InboxMessage): Promise<void> {
  const target = placeOf(pendingPathOf(file), message);
  if (target === file) return;
  await makePrivateDir(path.dirname(target));
  await rename(file, target);
}

/** A message file wherever it is now (waiting, delivered/, read/), read under its lock. */
async function locate(file: string): Promise<{ file: string; read: ReadResult<InboxMessage> }> {
  const pending = pendingPathOf(file);
  const dir = path.dirname(pending);
  const places = [
    pending,
    ...(["delivered", "read"] as const).map((a) => path.join(dir, a, path.basename(pending))),
  ];
  for (const place of places) {
    const read = await readOneFile(place);
    if (read.kind !== "missing") return { file: place, read };
  }
  return { file: pending, read: { kind: "missing" } };
}

/** Mark a message delivered and move it into `delivered/` (or `read/`); the caller holds its lock. */
export async function markDelivered(message: FiledMessage, deliveredAt: string): Promise<void> {
  const { file, ...value } = message;
  const next = { ...value, deliveredAt };
  await writeJson(file, InboxMessageSchema, next);
  await settle(file, next);
}

export function byBaseName(a: string, b: string): number {
  const [x, y] = [path.basename(a), path.basename(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

/** A message's file in `dir`: named by its creation time, so a listing sorts oldest first. */
export function messagePath(dir: string, message: Pick<InboxMessage, "createdAt" | "id">): string {
  return path.join(dir, `${message.createdAt.replace(/[:.]/g, "-")}-${message.id}.json`);
}

/** The message files of one directory, oldest first (a message's file name starts with its creation time). */
export async function messageFiles(dir: string): Promise<string[]> {
  const names = (await listDir(dir)).filter((name) => name.endsWith(".json")).sort();
  return names.map((name) => path.join(dir, name));
}

/**
 * `files` read in parallel, in their order; the damaged are left out and reported. A message listed twice (it moved
 * between two listings) is kept once, with its later marks.
 */
export async function readMessageFiles(
  files: readonly string[],
  read: (file: string) => Promise<ReadResult<InboxMessage>>,
): Promise<Listed<FiledMessage>> {
  const reads = await mapLimit(files, 32, read);
  const byId = new Map<string, FiledMessage>();
  const warnings: string[] = [];
  reads.forEach((result, i) => {
    if (result.kind === "corrupt") warnings.push(`inbox message ${result.warning}`);
    if (result.kind !== "ok") return;
    const seen = byId.get(result.value.id);
    const marks = (m: InboxMessage) => (m.readAt ? 2 : m.deliveredAt ? 1 : 0);
    if (!seen || marks(result.value) > marks(seen))
      byId.set(result.value.id, { ...result.value, file: files[i] as string });
  });
  return { items: [...byId.values()], warnings };
}

/** `unlessSet`: a file that has this field keeps its value. `durable` (default true): flushed to disk. */
export interface MarkOptions {
  unlessSet?: "readAt" | "attemptedAt" | "deliveredAt";
  durable?: boolean;
}

/**
 * Write `change` into each message's file, under its lock and re-read first wherever it is now, so two markings of one
 * message at the same time (a delivery and a read) never undo each other. A file gone (pruned, moved aside) is left
 * alone. The message then moves where its marks say (`delivered/`, `read/`), still under its lock: a delivery
 * waiting for the lock finds it gone from the pending place and sends nothing. A crash between the write and the move
 * leaves it marked where it was, which every reader takes by its marks, and an empty `change` moves it later (as it
 * moves one an older version marked in place).
 */
export async function markInboxFiles(
  messages: readonly { file: string }[],
  change: Partial<InboxMessage>,
  options: MarkOptions,
  lockTiming: Partial<LockTiming>,
): Promise<void> {
  await mapLimit(messages, 8, ({ file: listed }) =>
    withFileLock(
      pendingPathOf(listed),
      async () => {
        const { file, read: current } = await locate(listed);
        if (current.kind !== "ok" || (options.unlessSet && current.value[options.unlessSet])) return;
        const next = { ...current.value, ...change };
        const durable = options.durable ?? true;
        if (Object.keys(change).length > 0) await writeJson(file, InboxMessageSchema, next, { durable });
        await settle(file, next);
      },
      lockTiming,
    ),
  );
}

/**
 * The largest inbox message file read. A message's text is at most 16 kB and a notice's report as much (with its
 * summary and the copies in `data`, under 200 kB even with every character escaped); a larger file was not written by
 * us, and read whole it would put megabytes into a tool result.
 */
export const INBOX_FILE_MAX_BYTES = 1024 * 1024;

/** Move a file too large to be a message aside, as a damaged one is (`<file>.corrupt-…`), and say so. */
async function moveAsideTooLarge(file: string, size: number): Promise<ReadResult<InboxMessage>> {
  const target = `${file}.corrupt-${new Date().toISOString().replace(/[:.]/g, "-")}-${process.pid}-too-large`;
  const problem = `${size} bytes, over the ${INBOX_FILE_MAX_BYTES}-byte limit of an inbox message`;
  try {
    await rename(file, target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    return { kind: "missing" };
  }
  const warning = `${path.basename(file)} was damaged (${problem}) and moved aside to ${path.basename(target)}`;
  return { kind: "corrupt", warning, movedTo: target };
}

/**
 * One inbox message, its size checked on the open handle before it is read: an oversized one is moved aside unread.
 * One that does not parse is moved aside as readJson does (quarantine). A message gone from its pending place is
 * looked for where it moved to (`delivered/`, `read/`): a delivery or a read that moved it is never taken for a loss.
 */
export async function readInboxFile(file: string): Promise<ReadResult<InboxMessage>> {
  const read = await readOneFile(file);
  if (read.kind !== "missing" || pendingPathOf(file) !== file) return read;
  for (const area of ["delivered", "read"] as const) {
    const moved = await readOneFile(path.join(areaDir(path.dirname(file), area), path.basename(file)));
    if (moved.kind !== "missing") return moved;
  }
  return read;
}

async function readOneFile(file: string): Promise<ReadResult<InboxMessage>> {
  let text: string;
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "missing" };
    throw error;
  }
  let size: number;
  try {
    size = (await handle.stat()).size;
    text = size > INBOX_FILE_MAX_BYTES ? "" : await handle.readFile("utf8");
  } finally {
    await handle.close().catch(() => {});
  }
  if (size > INBOX_FILE_MAX_BYTES) return moveAsideTooLarge(file, size);
  const parsed = parseJson(text, InboxMessageSchema);
  if (parsed.ok) return { kind: "ok", value: parsed.value };
  const outcome = await quarantine(file, text);
  // Replaced by a writer since it was read: readJson reads it again, as any damaged file is.
  if (outcome.kind === "changed") return readJson(file, InboxMessageSchema);
  const movedTo = outcome.kind === "moved" ? outcome.to : undefined;
  return { kind: "corrupt", warning: corruptWarning(file, parsed.problem, outcome), movedTo };
}

/**
 * Delete message files, without their locks: only messages that reached their recipient are deleted, and those are
 * never sent again. A marking that re-read one just before (a late `readAt`) may write it back; the next pruning
 * deletes it again.
 */
export async function removeInboxFiles(files: readonly string[]): Promise<void> {
  await mapLimit(files, 16, (file) => rm(file, { force: true }));
}

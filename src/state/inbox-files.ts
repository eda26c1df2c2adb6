import { open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { mapLimit } from "../map-limit.ts";
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
import type { FiledMessage, Listed } from "./team-store.ts";

/**
 * Where an inbox's read messages go (`<inbox>/read/`). A read message never changes again (it is never delivered
 * after, and no mark but readAt applies to it), so what only needs the unread ones (a notice flush, the sweep,
 * `status`) lists and reads the inbox's own directory, whatever the number of read messages.
 */
export function readDirOf(inboxDir: string): string {
  return path.join(inboxDir, "read");
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

/** `files` read in parallel, in their order; the damaged are left out and reported. */
export async function readMessageFiles(
  files: readonly string[],
  read: (file: string) => Promise<ReadResult<InboxMessage>>,
): Promise<Listed<FiledMessage>> {
  const reads = await mapLimit(files, 32, read);
  const items: FiledMessage[] = [];
  const warnings: string[] = [];
  reads.forEach((result, i) => {
    if (result.kind === "ok") items.push({ ...result.value, file: files[i] as string });
    else if (result.kind === "corrupt") warnings.push(`inbox message ${result.warning}`);
  });
  return { items, warnings };
}

/** `unlessSet`: a file that has this field keeps its value. `durable` (default true): flushed to disk. */
export interface MarkOptions {
  unlessSet?: "readAt" | "attemptedAt" | "deliveredAt";
  durable?: boolean;
}

/**
 * Write `change` into each message's file, under its lock and re-read first, so two markings of one message at the
 * same time (a delivery and a read) never undo each other. A file gone (pruned, moved aside, read) is left alone. A
 * message that is read once marked is then moved into `read/`, still under its lock: a delivery waiting for the lock
 * finds it gone and sends nothing. A crash between the two leaves it read where it was, which every reader takes for
 * read, and an empty `change` moves it later (as it moves one an older version marked read in place).
 */
export async function markInboxFiles(
  messages: readonly { file: string }[],
  change: Partial<InboxMessage>,
  options: MarkOptions,
  lockTiming: Partial<LockTiming>,
): Promise<void> {
  await mapLimit(messages, 8, ({ file }) =>
    withFileLock(
      file,
      async () => {
        const current = await readJson(file, InboxMessageSchema);
        if (current.kind !== "ok" || (options.unlessSet && current.value[options.unlessSet])) return;
        const next = { ...current.value, ...change };
        const durable = options.durable ?? true;
        if (Object.keys(change).length > 0) await writeJson(file, InboxMessageSchema, next, { durable });
        // Inbox directories are named by agent id (a uuid): a directory named "read" is a read/ one.
        if (next.readAt === undefined || path.basename(path.dirname(file)) === "read") return;
        const readDir = readDirOf(path.dirname(file));
        await makePrivateDir(readDir);
        await rename(file, path.join(readDir, path.basename(file)));
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
 * One inbox message file, its size checked on the open handle before it is read: an oversized one is moved aside
 * unread. One that does not parse is moved aside as readJson does (quarantine).
 */
export async function readInboxFile(file: string): Promise<ReadResult<InboxMessage>> {
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

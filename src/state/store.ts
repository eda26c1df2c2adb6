import { randomBytes } from "node:crypto";
import { closeSync, linkSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { link, mkdir, open, readdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { type LockTiming, withFileLock } from "./lock.ts";
import { removeNow } from "./lock-instance.ts";
import {
  makePrivateDir,
  makePrivateDirNow,
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  tightenDir,
} from "./modes.ts";

export type ReadResult<T> =
  | { kind: "ok"; value: T }
  | { kind: "missing" }
  | { kind: "corrupt"; warning: string; movedTo: string | undefined };

function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException)?.code === "ENOENT";
}

function describeProblem(error: unknown): string {
  if (error instanceof SyntaxError) return `invalid JSON: ${error.message}`;
  if (error && typeof error === "object" && "issues" in error && Array.isArray(error.issues)) {
    const first = error.issues[0] as { path?: unknown[]; message?: string } | undefined;
    const where = first?.path?.length ? first.path.join(".") : "(root)";
    return `schema mismatch at ${where}: ${first?.message ?? "invalid"}`;
  }
  return error instanceof Error ? error.message : String(error);
}

export type QuarantineOutcome =
  | { kind: "moved"; to: string }
  /** Another process moved or removed it first. */
  | { kind: "gone" }
  /** The file no longer holds the damaged bytes (a writer replaced it): nothing moved; read it again. */
  | { kind: "changed" };

const sameBytes = (a: Buffer, b: Buffer | string) => a.equals(typeof b === "string" ? Buffer.from(b) : b);

let quarantineSeq = 0;

/**
 * Move a damaged file aside so the next read starts clean and a human can still inspect what was there, but only the
 * very file that was read damaged (`damaged`: its bytes): a newer file a writer put in its place since is left alone.
 * Checked before the rename, and again after it on what was moved, since a writer can replace the file in between;
 * a newer file moved by mistake is put back (unless a newer one still is there). What is left: for the microseconds
 * of that repair the file is missing, and a reader then takes it for absent. See specs/storage.md (Damaged files).
 */
export async function quarantine(
  file: string,
  damaged: Buffer | string,
  now: Date = new Date(),
): Promise<QuarantineOutcome> {
  const stamp = now.toISOString().replace(/[:.]/g, "-");
  // rename replaces an existing target: the sequence number keeps two quarantines in one millisecond apart.
  quarantineSeq += 1;
  const target = `${file}.corrupt-${stamp}-${process.pid}-${quarantineSeq}`;
  try {
    if (!sameBytes(await readFile(file), damaged)) return { kind: "changed" };
    await rename(file, target);
  } catch (error) {
    if (isNotFound(error)) return { kind: "gone" };
    throw error;
  }
  if (sameBytes(await readFile(target), damaged)) return { kind: "moved", to: target };
  await link(target, file).catch(() => {});
  await unlink(target).catch(() => {});
  return { kind: "changed" };
}

export function corruptWarning(file: string, problem: string, outcome: QuarantineOutcome): string {
  const where =
    outcome.kind === "moved"
      ? `moved aside to ${path.basename(outcome.to)}`
      : outcome.kind === "gone"
        ? "already moved aside by another process"
        : "left in place: it kept changing while being read";
  return `${path.basename(file)} was damaged (${problem}) and ${where}`;
}

/** How many times a read starts over when the damaged file it was about to move aside turned out replaced. */
const REREADS_AFTER_CHANGE = 3;

/** Parse and validate text already read; a problem is returned, never thrown. */
export function parseJson<S extends z.ZodType>(
  text: string,
  schema: S,
): { ok: true; value: z.infer<S> } | { ok: false; problem: string } {
  try {
    return { ok: true, value: schema.parse(JSON.parse(text)) };
  } catch (error) {
    return { ok: false, problem: describeProblem(error) };
  }
}

/**
 * `blocking`: read with a blocking call. Only for a small file read under its lock on a hot path (a heartbeat): it was
 * just written, so the page cache answers in microseconds, where a round trip through the thread pool costs several
 * times the read.
 */
export interface ReadOptions {
  blocking?: boolean;
}

/**
 * The text each file had when last read whole and valid, and the value it parsed to: the same text read again is not
 * parsed and validated again (an agent's file under its lock, read by every heartbeat of the agent while it rarely
 * changes). Values are shared with later readers: none may change one.
 */
export class ParsedTexts<T> {
  private readonly entries = new Map<string, { text: string; value: T }>();
  constructor(private readonly max = 4_096) {}

  get(file: string, text: string): T | undefined {
    const known = this.entries.get(file);
    return known?.text === text ? known.value : undefined;
  }

  set(file: string, text: string, value: T): void {
    if (this.entries.size >= this.max && !this.entries.has(file)) this.entries.clear();
    this.entries.set(file, { text, value });
  }
}

/** Read and validate a JSON state file. A damaged file is quarantined and reported, not thrown. */
export async function readJson<S extends z.ZodType>(
  file: string,
  schema: S,
  options: ReadOptions = {},
  /** Texts read before (see ParsedTexts). */
  parsedTexts?: ParsedTexts<z.infer<S>>,
): Promise<ReadResult<z.infer<S>>> {
  for (let attempt = 0; ; attempt++) {
    let text: string;
    try {
      text = options.blocking ? readFileSync(file, "utf8") : await readFile(file, "utf8");
    } catch (error) {
      if (isNotFound(error)) return { kind: "missing" };
      throw error;
    }
    const known = parsedTexts?.get(file, text);
    if (known !== undefined) return { kind: "ok", value: known };
    const parsed = parseJson(text, schema);
    if (parsed.ok) {
      parsedTexts?.set(file, text, parsed.value);
      return { kind: "ok", value: parsed.value };
    }
    const outcome = await quarantine(file, text);
    if (outcome.kind === "changed" && attempt < REREADS_AFTER_CHANGE) continue;
    const movedTo = outcome.kind === "moved" ? outcome.to : undefined;
    return { kind: "corrupt", warning: corruptWarning(file, parsed.problem, outcome), movedTo };
  }
}

/**
 * `durable` false: atomic but not flushed to disk (no fsync), for writes a power cut may undo without harm: a value
 * recomputed from other state on every write, or a first file that a durable write follows. An fsync waits for all
 * dirty data of the file system, which costs hundreds of ms while other programs (booting `opencode attach` panes)
 * write a lot.
 * `blocking` (never durable: a blocking fsync would stall the host process for as long): written with blocking calls,
 * for a small file written under its lock on a hot path, so the lock is held through no turn of the event loop (see
 * `withFileLock`).
 */
export type WriteOptions = { durable?: boolean; blocking?: false } | { durable: false; blocking: true };

/** `value` checked against `schema` and serialised: a value that fails is a bug in the caller and throws here. */
function jsonText<S extends z.ZodType>(schema: S, value: z.infer<S>): string {
  return `${JSON.stringify(schema.parse(value), null, 2)}\n`;
}

/** How writeJson and createJson are called: `value`, checked against `schema`, into `file`. */
type JsonWriter = <S extends z.ZodType>(
  file: string,
  schema: S,
  value: z.infer<S>,
  options?: WriteOptions,
) => Promise<void>;

/** How tempName ends: `.<pid>.<8 hex>.tmp`. */
export const TEMP_NAME = /\.\d+\.[0-9a-f]{8}\.tmp$/;

/** A fresh temporary name beside `file`: no reader takes a `.tmp` file for state. */
function tempName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
}

/**
 * `text` written whole under a fresh temporary name beside `file` (flushed when `durable`): the caller puts it in place
 * with one atomic call. A crash before that leaves only a `.tmp` file, which no reader takes for state.
 */
async function writeTemp(file: string, text: string | Buffer, durable: boolean): Promise<string> {
  const temp = tempName(file);
  const handle = await open(temp, "wx", PRIVATE_FILE_MODE);
  try {
    await handle.writeFile(text);
    if (durable) await handle.sync();
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  } finally {
    await handle.close();
  }
  return temp;
}

/** writeTemp with blocking calls and no flush (see WriteOptions). */
export function writeTempNow(file: string, text: string | Buffer): string {
  const temp = tempName(file);
  const fd = openSync(temp, "wx", PRIVATE_FILE_MODE);
  try {
    writeFileSync(fd, text);
  } catch (error) {
    removeNow(temp);
    throw error;
  } finally {
    closeSync(fd);
  }
  return temp;
}

/**
 * Validate, then replace the file atomically: temp file, fsync, rename. Five system calls where write-file-atomic made
 * ten (realpath, stat, chown, chmod, an unlink after the rename): a sweep writing 100 agents spent a tenth less in
 * its writes. Our files are never symlinks to follow, and the temp file is created 0600, so no chmod is needed.
 */
export const writeJson: JsonWriter = async (file, schema, value, options = {}) => {
  const text = jsonText(schema, value);
  if (options.blocking) {
    makePrivateDirNow(path.dirname(file));
    const temp = writeTempNow(file, text);
    try {
      renameSync(temp, file);
    } catch (error) {
      removeNow(temp);
      throw error;
    }
    return;
  }
  await replaceText(file, text, options.durable ?? true);
};

/** `text` put in place of `file` atomically: temp file (flushed when `durable`), rename. */
export async function replaceText(file: string, text: string, durable = true): Promise<void> {
  await makePrivateDir(path.dirname(file));
  const temp = await writeTemp(file, text, durable);
  try {
    await rename(temp, file);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
}

/**
 * Make the names in `dir` durable (renames and creates done in it): a file's fsync flushes its data, not the
 * directory entry that names it.
 */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Flush what `file` holds now to disk (a write made without fsync under its lock, made durable once the lock is given
 * back). A file gone meanwhile has nothing to flush.
 */
export async function flushFile(file: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, "r");
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Write a file that must not exist yet; cheaper than a replace and never clobbers. Durable by default: the content is
 * flushed before the name appears, so after a power cut the file is there whole or not at all (never empty).
 */
export const createJson: JsonWriter = async (file, schema, value, options = {}) => {
  // Written whole under a temporary name, then linked into place: link() is atomic and fails if the name exists, so
  // the file is created exclusively and no reader ever sees it half-written (a reader would take a partial file for a
  // damaged one and move it aside).
  const text = jsonText(schema, value);
  if (options.blocking) {
    makePrivateDirNow(path.dirname(file));
    const temp = writeTempNow(file, text);
    try {
      linkSync(temp, file);
    } finally {
      removeNow(temp);
    }
    return;
  }
  await makePrivateDir(path.dirname(file));
  const temp = await writeTemp(file, text, options.durable ?? true);
  try {
    await link(temp, file);
  } finally {
    await unlink(temp).catch(() => {});
  }
};

export interface UpdateOutcome<T> {
  value: T | undefined;
  warnings: string[];
}

/**
 * Read-modify-write under the file's cross-process lock. `fn` sees the current value (undefined when missing or
 * damaged) and returns the new value, or undefined to leave the file as it is. With `blocking` the read is blocking
 * too, so a synchronous `fn` holds the lock through no turn of the event loop.
 */
export async function updateJson<T>(
  file: string,
  schema: z.ZodType<T>,
  fn: (current: T | undefined) => NoInfer<T> | undefined | Promise<NoInfer<T> | undefined>,
  timing?: Partial<LockTiming>,
  options: WriteOptions = {},
): Promise<UpdateOutcome<T>> {
  return withFileLock(
    file,
    async () => {
      const warnings: string[] = [];
      const current = await readJson(file, schema, { blocking: options.blocking === true });
      if (current.kind === "corrupt") warnings.push(current.warning);
      const next = await fn(current.kind === "ok" ? current.value : undefined);
      if (next === undefined) return { value: current.kind === "ok" ? current.value : undefined, warnings };
      await writeJson(file, schema, next, options);
      return { value: next, warnings };
    },
    timing,
  );
}

/** Names of the entries in a directory, or none when it does not exist. */
export async function listDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if (isNotFound(error)) return [];
    throw error;
  }
}

/**
 * The storage dir ignores itself, so team state never shows up in the user's git status. It is private to its owner
 * (specs/storage.md); one made looser by an older version is tightened. Its parent keeps the default mode: it is the
 * project's, not ours.
 */
export async function ensureStorageRoot(root: string): Promise<void> {
  await mkdir(path.dirname(root), { recursive: true });
  await mkdir(root, { mode: PRIVATE_DIR_MODE }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST") throw error;
  });
  await tightenDir(root);
  try {
    await writeFile(path.join(root, ".gitignore"), "*\n", { flag: "wx", mode: PRIVATE_FILE_MODE });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
}

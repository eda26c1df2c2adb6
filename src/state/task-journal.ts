// The task board's journal: status changes appended beside the board (tasks.json) instead of rewriting it. Its format,
// what it does to a board (replay), and which board changes it can hold; the files are written in task-board-store.ts.
// See specs/storage.md ("The task board's journal").
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { type Task, type TaskBoard, TaskSchema, version } from "./schemas.ts";

/** The journal's file name beside the board's (warnings name it). */
export const JOURNAL_NAME = "tasks.journal";

/** Past either, the next change rewrites the board and starts a fresh journal (compaction). */
export const JOURNAL_BOUND = { records: 256, bytes: 64 * 1024 };

/** The journal's first line: the board generation its records apply to. */
const HeaderSchema = z.object({ version, generation: z.string().min(1) });

/** A task's status fields: what claim, update-task's status and assignee, and a hand-back change. */
const StatusFieldsSchema = TaskSchema.pick({
  status: true,
  assignee: true,
  updatedAt: true,
  reassignedReason: true,
  reason: true,
});
type StatusFields = z.infer<typeof StatusFieldsSchema>;
const STATUS_FIELDS = Object.keys(StatusFieldsSchema.shape) as (keyof StatusFields)[];

/**
 * Every other field of a task is its definition, changed only by a rewrite of the board. Taken from the schema, so a
 * field added to tasks later is a definition (a rewrite) until it is named a status field above.
 */
const DEFINITION_FIELDS = (Object.keys(TaskSchema.shape) as (keyof Task)[]).filter(
  (field) => !(STATUS_FIELDS as string[]).includes(field),
);

/**
 * One task's status fields, absolute (a field absent here is absent from the task): replaying a record twice gives
 * the same board. `i` is the task's place on the board, `id` checks it: no task is added or removed while a journal
 * is in use, and a board edited by hand may hold an id twice.
 */
// Place and id first: a line cut short still names its task.
const EntrySchema = z.object({ i: z.number().int().min(0), id: z.string() }).extend(StatusFieldsSchema.shape);
type Entry = z.infer<typeof EntrySchema>;

/** One record per board update, one line each: a torn append loses the whole update, never part of it. */
const RecordSchema = z.object({ tasks: z.array(EntrySchema).min(1) });

/** A fresh generation for a rewritten board: random, so a journal left by a lost or restored board never matches. */
export function newGeneration(): string {
  return randomBytes(6).toString("hex");
}

export function journalHeader(generation: string): string {
  return `${JSON.stringify({ version: 1, generation })}\n`;
}

/** What a journal held, as far as a board of its generation can use it. */
export interface JournalState {
  /** The header's generation; undefined when the journal is missing, empty or its header is unreadable. */
  generation: string | undefined;
  /** Complete records (lines after the header). */
  records: number;
  /** Bytes (not characters) up to the end of the last complete line: where the next record goes. */
  end: number;
  /** Bytes after `end`: an append cut short by a crash (or one in flight, for a reader without the lock). */
  torn: boolean;
  /** Lines that could not be applied, with why: damage, reported and repaired under the lock. */
  damaged: string[];
}

export const NO_JOURNAL: JournalState = {
  generation: undefined,
  records: 0,
  end: 0,
  torn: false,
  damaged: [],
};

/** The task with the entry's status fields (and only those) in place of its own. */
function withStatus(task: Task, entry: Entry): Task {
  const next: Record<string, unknown> = { ...task };
  for (const field of STATUS_FIELDS) {
    if (entry[field] === undefined) delete next[field];
    else next[field] = entry[field];
  }
  return next as Task;
}

/** The task a damaged line names, when its id can still be read: the warning says whose change was lost. */
function namedTask(line: string): string {
  const id = /"id":"((?:[^"\\]|\\.){1,80})"/.exec(line)?.[1];
  return id ? `; it changed task '${id}', whose status may be behind: check it` : "";
}

function problemOf(
  line: string,
  tasks: readonly Task[],
): { record?: z.infer<typeof RecordSchema>; problem?: string } {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (error) {
    return { problem: `invalid JSON: ${(error as Error).message}` };
  }
  const parsed = RecordSchema.safeParse(json);
  if (!parsed.success) return { problem: `schema mismatch: ${parsed.error.issues[0]?.message ?? "invalid"}` };
  const stray = parsed.data.tasks.find((entry) => tasks[entry.i]?.id !== entry.id);
  if (stray) return { problem: `no task '${stray.id}' at place ${stray.i} of the board` };
  return { record: parsed.data };
}

/** The complete lines of `bytes` (up to its last newline), and where they end in bytes. */
function completeLines(bytes: Buffer): { lines: string[]; end: number } {
  // Bytes, not characters: `end` is where a writer cuts and appends, and reasons hold any text.
  const end = bytes.lastIndexOf(0x0a) + 1;
  const lines = bytes.toString("utf8", 0, end).split("\n");
  lines.pop();
  return { lines, end };
}

/** `records` (journal lines from line `firstLine` on) applied to `board`; what could not be, into `damaged`. */
function applied(
  board: TaskBoard,
  records: readonly string[],
  firstLine: number,
  damaged: string[],
): TaskBoard {
  let tasks: Task[] | undefined;
  records.forEach((line, index) => {
    const { record, problem } = problemOf(line, board.tasks);
    if (!record) {
      damaged.push(`line ${firstLine + index} was damaged (${problem})${namedTask(line)}`);
      return;
    }
    tasks ??= [...board.tasks];
    for (const entry of record.tasks) tasks[entry.i] = withStatus(tasks[entry.i] as Task, entry);
  });
  return tasks ? { ...board, tasks } : board;
}

/**
 * The board with the journal's records applied, in order, when the journal's header names the board's generation
 * (another generation's records, or a journal without a header, are not applied: the board alone is then a whole
 * state). A line after the last newline is a torn append and is not applied; a complete line that fails to parse,
 * fails its schema or names no task of the board is left out and reported in `damaged`. `board` is not changed.
 */
export function replay(board: TaskBoard, bytes: Buffer): { board: TaskBoard; journal: JournalState } {
  const { lines, end } = completeLines(bytes);
  const journal: JournalState = {
    generation: undefined,
    records: 0,
    end,
    torn: end < bytes.length,
    damaged: [],
  };
  const [head, ...rest] = lines;
  if (head === undefined) return { board, journal };
  const header = HeaderSchema.safeParse(safeJson(head));
  if (!header.success) {
    journal.damaged.push(
      `its header is unreadable, so none of its ${rest.length} record(s) could be applied`,
    );
    return { board, journal };
  }
  journal.generation = header.data.generation;
  journal.records = rest.length;
  if (board.generation !== journal.generation) return { board, journal };
  return { board: applied(board, rest, 2, journal.damaged), journal };
}

/**
 * What the journal's bytes after `journal.end` add to `board`, the board `journal` was replayed onto: a reader that
 * kept both reads only what other writers appended since (the journal only grows between two rewrites of the board).
 */
export function replayTail(
  board: TaskBoard,
  journal: JournalState,
  tail: Buffer,
): { board: TaskBoard; journal: JournalState } {
  const { lines, end } = completeLines(tail);
  const next: JournalState = {
    ...journal,
    records: journal.records + lines.length,
    end: journal.end + end,
    torn: end < tail.length,
    damaged: [],
  };
  if (board.generation === undefined || journal.generation !== board.generation)
    return { board, journal: next };
  return { board: applied(board, lines, journal.records + 2, next.damaged), journal: next };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Equal as JSON values: definition fields are strings, lists of strings, or absent. */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((value, index) => sameValue(value, b[index]));
  }
  return false;
}

/** Whether `after` differs from `before` in its status fields only. */
function statusOnly(before: Task, after: Task): boolean {
  return DEFINITION_FIELDS.every((field) => sameValue(before[field], after[field]));
}

/**
 * The journal record that turns `before` into `after`, as the line to append; undefined when the change is more than
 * status fields (a task added, removed or redefined, or the board's own fields changed), which only a rewrite of the
 * board holds; "" when nothing changed. The changed tasks are checked against their schema here, as a rewrite checks
 * the whole board: an invalid value is a bug in the caller and throws.
 */
export function statusRecord(before: TaskBoard, after: TaskBoard): string | undefined {
  if (
    after.version !== before.version ||
    after.nextId !== before.nextId ||
    after.series !== before.series ||
    after.generation !== before.generation ||
    after.tasks.length !== before.tasks.length
  ) {
    return undefined;
  }
  const entries: Entry[] = [];
  for (let i = 0; i < after.tasks.length; i++) {
    const old = before.tasks[i] as Task;
    const task = after.tasks[i] as Task;
    if (task === old) continue;
    if (!statusOnly(old, task)) return undefined;
    const fields: Record<string, unknown> = { i, id: task.id };
    for (const field of STATUS_FIELDS) fields[field] = task[field];
    const entry = EntrySchema.parse(fields);
    if (STATUS_FIELDS.some((field) => entry[field] !== old[field])) entries.push(entry);
  }
  return entries.length === 0 ? "" : `${JSON.stringify({ tasks: entries })}\n`;
}

/** `after` as the board it becomes once its record is replayed: the changed tasks hold only schema-checked fields. */
export function appliedRecord(before: TaskBoard, line: string): TaskBoard {
  return replay(before, Buffer.from(`${journalHeader(before.generation ?? "")}${line}`)).board;
}

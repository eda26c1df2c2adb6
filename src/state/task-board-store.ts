// The task board's files: tasks.json and its journal of status changes (task-journal.ts), read into one board, cached
// by the stat of both, and changed under the board's lock. See specs/storage.md ("The task board's journal").
import { open } from "node:fs/promises";
import path from "node:path";
import type { DamageNotes } from "./damage-notes.ts";
import { type LockTiming, withFileLock } from "./lock.ts";
import { PRIVATE_FILE_MODE } from "./modes.ts";
import type { StoragePaths } from "./paths.ts";
import { type TaskBoard, TaskBoardSchema } from "./schemas.ts";
import { createJson, type ReadResult, readJson, replaceText, syncDir, type UpdateOutcome } from "./store.ts";
import {
  appendedSince,
  appendFlushed,
  type BoardFiles,
  inodeOf,
  keepAside,
  keyOf,
  readBytes,
  type Signature,
  signatureOf,
  statOf,
} from "./task-board-files.ts";
import {
  appliedRecord,
  JOURNAL_BOUND,
  JOURNAL_NAME,
  type JournalState,
  journalHeader,
  NO_JOURNAL,
  newGeneration,
  replay,
  replayTail,
  statusRecord,
} from "./task-journal.ts";
import { newTaskSeries } from "./task-series.ts";

/** How often a read without the lock starts over when the board was replaced while its journal was read. */
const REREADS_AFTER_REWRITE = 3;

/** The board as read (journal replayed), with the journal's state for the next append. */
interface Loaded {
  result: ReadResult<TaskBoard>;
  journal: JournalState;
}

export class TaskBoardStore {
  /**
   * Per board file: the board last read or written. Handed out again while both files' stats are what they were, if
   * `trusted`; in any case the base a later read adds the journal's new records to (see grown).
   */
  private readonly boards = new Map<string, { signature: Signature; loaded: Loaded; trusted: boolean }>();

  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
    private readonly damage: DamageNotes,
  ) {}

  private files(teamName: string): BoardFiles {
    const board = this.paths.tasks(teamName);
    return { board, journal: path.join(path.dirname(board), JOURNAL_NAME) };
  }

  /**
   * The board as on disk, its journal replayed: the same object while neither file changed (a stat of each), so
   * list-tasks and `status` of a board of a thousand tasks cost two stats. Callers never change the board they get.
   * Damaged journal lines are repaired at once under the board's lock and noted for the team's next listing.
   */
  async read(teamName: string): Promise<ReadResult<TaskBoard>> {
    const files = this.files(teamName);
    const signature = signatureOf(files);
    const hit = this.cached(files, signature);
    if (hit) return hit.result;
    const loaded = await this.load(files, signature);
    if (loaded.result.kind === "ok" && loaded.journal.damaged.length > 0) {
      const { value, warnings } = await this.update(teamName, () => undefined);
      for (const warning of warnings) this.damage.noted(teamName, { kind: "corrupt", warning });
      return value ? { kind: "ok", value } : { kind: "missing" };
    }
    this.remember(files, signature, loaded);
    return loaded.result;
  }

  /** The board a new team starts with (create-team): the only board whose ids carry no series. */
  async create(teamName: string): Promise<void> {
    await createJson(this.paths.tasks(teamName), TaskBoardSchema, { version: 1, nextId: 1, tasks: [] });
  }

  /**
   * Read-modify-write of the board under its lock. A change of status fields only (claim, status updates, hand-back)
   * is one record appended to the journal and flushed; anything else, or a journal past its bound, rewrites the board
   * and starts a fresh journal. A board that is missing or damaged was lost (create-team writes the first one): its
   * successor starts a new series, so no id of the lost board is ever issued again.
   */
  update(
    teamName: string,
    fn: (board: TaskBoard) => TaskBoard | undefined | Promise<TaskBoard | undefined>,
  ): Promise<UpdateOutcome<TaskBoard>> {
    const files = this.files(teamName);
    return withFileLock(
      files.board,
      async () => {
        const signature = signatureOf(files);
        const hit = this.cached(files, signature);
        const current = hit ?? (await this.load(files, signature));
        const warnings = current.journal.damaged.map((damage) => `${JOURNAL_NAME} ${damage}`);
        if (current.result.kind === "corrupt") warnings.push(current.result.warning);
        const start =
          current.result.kind === "ok"
            ? current.result.value
            : { version: 1 as const, nextId: 1, series: newTaskSeries(), tasks: [] };
        const next = await fn(start);
        if (next === undefined) {
          if (current.result.kind !== "ok") return { value: undefined, warnings };
          if (current.journal.damaged.length === 0) {
            // What it read from disk is kept as a read's would be; a board it had already is kept as it was.
            if (!hit) this.remember(files, signature, current);
            return { value: start, warnings };
          }
        }
        const record = this.usable(current) ? statusRecord(start, next ?? start) : undefined;
        if (record === "") return { value: start, warnings };
        if (record !== undefined && this.fits(current.journal, record)) {
          return { value: await this.append(files, signature, current, record), warnings };
        }
        return { value: await this.rewrite(files, next ?? start, current, warnings), warnings };
      },
      this.lockTiming,
    );
  }

  private cached(files: BoardFiles, signature: Signature): Loaded | undefined {
    const hit = this.boards.get(files.board);
    if (
      hit?.trusted &&
      hit.signature.board === signature.board &&
      hit.signature.journal === signature.journal
    ) {
      return hit.loaded;
    }
    return undefined;
  }

  /**
   * Keep what was read from disk: handed out again while neither file changes unless the files are too fresh to trust
   * or the journal has a torn end (an append may be in flight); never a damaged board (moved aside: nothing to keep)
   * or a journal with damaged lines (repaired at once).
   */
  private remember(files: BoardFiles, signature: Signature, loaded: Loaded): void {
    if (loaded.result.kind !== "ok" || loaded.journal.damaged.length > 0) {
      this.boards.delete(files.board);
      return;
    }
    const trusted = signature.settled && !loaded.journal.torn;
    this.boards.set(files.board, { signature, loaded, trusted });
  }

  /**
   * The board as kept, with what other writers appended to its journal since, when only that changed: the board's
   * file is the one read (same stat), the journal the same file (same inode) starting with the same header and no
   * shorter. Between two rewrites of the board the journal only grows, and a rewrite replaces the board first, so the
   * bytes kept were not touched. Read with blocking calls (a few small reads). Undefined when anything else changed,
   * or the board was replaced while the journal was read: the files are then read whole.
   */
  private grown(files: BoardFiles, signature: Signature): Loaded | undefined {
    const base = this.boards.get(files.board);
    const was = base?.loaded.journal;
    if (!base || !was || base.loaded.result.kind !== "ok" || was.generation === undefined) return undefined;
    if (
      base.signature.board !== signature.board ||
      inodeOf(base.signature.journal) !== inodeOf(signature.journal)
    ) {
      return undefined;
    }
    const tail = appendedSince(files.journal, journalHeader(was.generation), was.end);
    if (tail === undefined) return undefined;
    if (keyOf(statOf(files.board)) !== signature.board) return undefined;
    const { board, journal } = replayTail(base.loaded.result.value, was, tail);
    return { result: { kind: "ok", value: board }, journal };
  }

  /**
   * Both files read, the journal replayed onto the board. The board is read first: a rewrite replaces it before it
   * resets the journal, so a journal read after it is of the same generation or of a newer one, whose records are not
   * applied. In that case (the board's stat changed meanwhile) the read starts over, for the newer board.
   */
  private async load(files: BoardFiles, signature: Signature): Promise<Loaded> {
    const grown = this.grown(files, signature);
    if (grown) return grown;
    for (let attempt = 0; ; attempt++) {
      const boardBefore = keyOf(statOf(files.board));
      const board = await readJson(files.board, TaskBoardSchema);
      if (board.kind !== "ok") return { result: board, journal: NO_JOURNAL };
      const replayed = replay(board.value, await readBytes(files.journal));
      if (keyOf(statOf(files.board)) !== boardBefore && attempt < REREADS_AFTER_REWRITE) continue;
      return { result: { kind: "ok", value: replayed.board }, journal: replayed.journal };
    }
  }

  private usable(current: Loaded): boolean {
    const { result, journal } = current;
    return (
      result.kind === "ok" &&
      result.value.generation !== undefined &&
      journal.generation === result.value.generation &&
      journal.damaged.length === 0
    );
  }

  private fits(journal: JournalState, record: string): boolean {
    return (
      journal.records < JOURNAL_BOUND.records &&
      journal.end + Buffer.byteLength(record) <= JOURNAL_BOUND.bytes
    );
  }

  /**
   * One record appended (a torn append a crash left is cut first) and flushed, then remembered with the stats taken
   * under the lock: another writer can only make the journal longer or replace the board (a new inode), so those
   * stats change with any later write, however soon.
   */
  private async append(
    files: BoardFiles,
    signature: Signature,
    current: Loaded,
    record: string,
  ): Promise<TaskBoard> {
    const before = (current.result as { value: TaskBoard }).value;
    const board = appliedRecord(before, record);
    const bytes = Buffer.from(record);
    const info = await appendFlushed(
      files.journal,
      bytes,
      current.journal.torn ? current.journal.end : undefined,
    );
    const end = current.journal.end + bytes.length;
    // A journal longer than what this store knew plus its record had another writer in it (a lock taken over from a
    // writer that stalled): nothing is remembered.
    if (info.size !== BigInt(end)) {
      this.boards.delete(files.board);
      return board;
    }
    const journal: JournalState = {
      ...current.journal,
      records: current.journal.records + 1,
      end,
      torn: false,
    };
    this.boards.set(files.board, {
      signature: { board: signature.board, journal: keyOf(info), settled: true },
      loaded: { result: { kind: "ok", value: board }, journal },
      trusted: true,
    });
    return board;
  }

  /**
   * The board written whole under a new generation, then the journal started afresh in place. The board's rename is
   * made durable (the directory flushed) before the journal is touched: until the journal holds the new header, its
   * records are another generation's and are not applied, so a crash at any step leaves the old state or the new one,
   * and never loses a record the new board does not hold. A journal that could not be used whole (damage, or the
   * records of a lost board) is kept aside first.
   */
  private async rewrite(
    files: BoardFiles,
    next: TaskBoard,
    current: Loaded,
    warnings: string[],
  ): Promise<TaskBoard> {
    const board = TaskBoardSchema.parse({ ...next, generation: newGeneration() });
    const handle = await open(files.journal, "a+", PRIVATE_FILE_MODE);
    try {
      const old =
        current.journal.damaged.length > 0 || current.result.kind !== "ok"
          ? await readBytes(files.journal)
          : Buffer.alloc(0);
      if (old.toString().trim() !== "") {
        const copy = await keepAside(files.journal, old);
        warnings.push(
          current.result.kind === "ok"
            ? `${JOURNAL_NAME} was kept aside as ${copy}; the board was rewritten from its readable records`
            : `${JOURNAL_NAME} of the lost board was kept aside as ${copy}`,
        );
      }
      await replaceText(files.board, `${JSON.stringify(board, null, 2)}\n`);
      await syncDir(path.dirname(files.board));
      const header = Buffer.from(journalHeader(board.generation as string));
      await handle.truncate(0);
      await handle.write(header, 0, header.length, 0);
      await handle.datasync();
      const journalKey = keyOf(await handle.stat({ bigint: true }));
      const journal: JournalState = { ...NO_JOURNAL, generation: board.generation, end: header.length };
      this.boards.set(files.board, {
        signature: { board: keyOf(statOf(files.board)), journal: journalKey, settled: true },
        loaded: { result: { kind: "ok", value: board }, journal },
        trusted: true,
      });
    } finally {
      await handle.close();
    }
    return board;
  }
}

import type { BigIntStats } from "node:fs";
import { stat } from "node:fs/promises";

/**
 * How long after its last change a file's stat is trusted to reveal the next change. File timestamps come from a
 * coarse clock (a few ms on Linux), so two writes in quick succession can leave the same mtime; once the mtime is
 * this far in the past, any later write gets a later one.
 */
const SETTLE_MS = 100;

function signature(info: BigIntStats): string {
  return `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
}

/**
 * Parsed files remembered by path and trusted while their stat is unchanged: listing 1000 agents then costs one stat
 * per file instead of a read, a parse and a validation. Files that changed within SETTLE_MS are always read.
 */
export class StatCache<T> {
  private readonly entries = new Map<string, { signature: string; value: T }>();

  /** The value for `file`: cached when its stat says it is unchanged, else from `read` (a miss: undefined). */
  async get(file: string, read: () => Promise<T>): Promise<T> {
    const info = await stat(file, { bigint: true }).catch(() => undefined);
    if (!info) {
      this.entries.delete(file);
      return read();
    }
    const sig = signature(info);
    const hit = this.entries.get(file);
    if (hit && hit.signature === sig) return hit.value;
    const value = await read();
    if (Date.now() - Number(info.mtimeMs) > SETTLE_MS) this.entries.set(file, { signature: sig, value });
    else this.entries.delete(file);
    return value;
  }

  /** Keep only the files `keep` accepts (bounds the cache by the files that still exist). */
  retain(keep: (file: string) => boolean): void {
    for (const file of this.entries.keys()) if (!keep(file)) this.entries.delete(file);
  }
}

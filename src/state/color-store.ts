import { z } from "zod";
import type { LockTiming } from "./lock.ts";
import type { StoragePaths } from "./paths.ts";
import { isoDate, version } from "./schemas.ts";
import { flushFile, updateJson, type WriteOptions } from "./store.ts";

/** One color handed to an agent, and when it was given back (the pool itself is kept in color-pool.json). */
export const ColorAssignmentSchema = z.object({
  color: z.string(),
  agentId: z.string(),
  teamName: z.string(),
  assignedAt: isoDate,
  releasedAt: isoDate.optional(),
});
export type ColorAssignment = z.infer<typeof ColorAssignmentSchema>;

export const ColorPoolSchema = z.object({
  version,
  assignments: z.array(ColorAssignmentSchema),
});
export type ColorPool = z.infer<typeof ColorPoolSchema>;

/**
 * The project's color-pool.json: which agent holds which color. A damaged pool is moved aside and colors are
 * assigned afresh; the warning says so.
 */
export class ColorStore {
  constructor(
    private readonly paths: StoragePaths,
    private readonly lockTiming: Partial<LockTiming>,
  ) {}

  /**
   * Read-modify-write under the pool's cross-process lock. `fn` sees undefined when the pool is missing or damaged and
   * returns the new pool, or undefined to leave it. Returns the damage warnings.
   */
  async update(
    fn: (current: ColorPool | undefined) => ColorPool | undefined | Promise<ColorPool | undefined>,
    options: WriteOptions = {},
  ): Promise<string[]> {
    const { warnings } = await updateJson(
      this.paths.colorPool,
      ColorPoolSchema,
      fn,
      this.lockTiming,
      options,
    );
    return warnings.map((warning) => `${warning}; colors are assigned afresh`);
  }

  /** Flush the pool to disk: an update made without fsync (a spawn's color), made durable later. */
  flush(): Promise<void> {
    return flushFile(this.paths.colorPool);
  }
}

// When a lock (or a takeover guard) counts as abandoned, and removing one that does without ever removing a lock
// someone else has taken since: judging and removing are one step under the lock's takeover guard.
import { randomBytes } from "node:crypto";
import { link, rename, rm } from "node:fs/promises";
import {
  code,
  inspect,
  localOwner,
  newOwnerToken,
  removeNow,
  type Seen,
  tryCreate,
} from "./lock-instance.ts";

/** A lock whose mtime is further ahead than this was made before the clock went back: it is stale. */
const FUTURE_SKEW_MS = 2_000;
/**
 * A lock or guard of a live process of this host goes stale only after this many `staleMs`: its holder refreshes it
 * whatever its age, so it is this old only if the holder stalled that long or died and its pid was reused.
 */
const LIVE_OWNER_STALE_FACTOR = 6;

/** See specs/storage.md (Cross-process safety) for when a lock (or a takeover guard) counts as abandoned. */
export function isStale(seen: Seen, staleMs: number): boolean {
  const age = Date.now() - seen.mtimeMs;
  if (age < -FUTURE_SKEW_MS) return true;
  const local = localOwner(seen.owner);
  if (local === "dead") return true;
  return age > (local === "alive" ? staleMs * LIVE_OWNER_STALE_FACTOR : staleMs);
}

/** Ours, and young enough that nobody can be taking it over: it may be removed without the guard. */
export function isOwnFresh(seen: Seen | undefined, owner: string, staleMs: number): boolean {
  if (seen?.owner !== owner) return false;
  const age = Date.now() - seen.mtimeMs;
  return age >= -FUTURE_SKEW_MS && age < staleMs / 2;
}

/** The very instance judged (same inode, token and mtime), and still abandoned. */
export function sameStale(seen: Seen, judged: Seen, staleMs: number): boolean {
  return (
    seen.ino === judged.ino &&
    seen.owner === judged.owner &&
    seen.mtimeMs === judged.mtimeMs &&
    isStale(seen, staleMs)
  );
}

/** How breakIfSame names a guard it moves aside: `<lock>.takeover.<16 hex>.aside`. */
export const ASIDE_GUARD_NAME = /\.takeover\.[0-9a-f]{16}\.aside$/;

/**
 * Break an abandoned takeover guard only if what is there passes `stillSame`: move whatever is at the path to a unique
 * name, judge what was moved, and put it back (link, which never replaces a newer file) if it is not the one judged.
 * Several waiters may judge one abandoned guard at once, and nothing serialises them: a check on the path followed by
 * a removal by path would remove the guard a live taker created in between.
 */
async function breakIfSame(file: string, stillSame: (seen: Seen) => boolean): Promise<"removed" | "changed"> {
  // A crash before the removal below leaves this name; the liveness loop removes it an hour later (stray-temps.ts).
  const aside = `${file}.${randomBytes(8).toString("hex")}.aside`;
  try {
    await rename(file, aside);
  } catch (error) {
    if (code(error) === "ENOENT") return "changed";
    throw error;
  }
  const seen = inspect(aside);
  if (seen && stillSame(seen)) {
    await rm(aside, { recursive: true, force: true });
    return "removed";
  }
  // Not the one judged: a live holder's. Put it back; if the path was taken meanwhile, the holder has lost it and its
  // token check keeps it from removing the newer one.
  await link(aside, file).catch(async (error) => {
    if (code(error) === "EEXIST") return;
    // Where link() follows a final symbolic link (macOS, the BSDs; Linux does not) a guard that is a link is made again
    // from its token: symlink, like link, never replaces what took the path meanwhile.
    if (seen?.link) {
      try {
        tryCreate(file, seen.owner);
      } catch {
        // A guard that cannot be put back is lost; its taker's token check then leaves the path alone.
      }
      return;
    }
    // A directory (an older version's lock) cannot be linked; moving it back is safe only when nothing took the path.
    await rename(aside, file).catch(() => {});
  });
  await rm(aside, { recursive: true, force: true });
  return "changed";
}

/**
 * Remove `lock` if `stillSame` holds for what is there, under the lock's takeover guard (`<lock>.takeover`, taken like
 * a lock). Every removal of a lock that may be stale goes through the guard and re-checks under it, so two takers
 * that judged the same stale lock cannot remove a lock one of them (or anyone) has created since: judging and
 * removing are one step. "busy": another process holds the guard; try again later.
 */
export async function removeUnderGuard(
  lock: string,
  staleMs: number,
  stillSame: (seen: Seen) => boolean,
): Promise<"removed" | "changed" | "busy"> {
  const guard = `${lock}.takeover`;
  const token = newOwnerToken();
  if (!tryCreate(guard, token)) {
    // Held for microseconds by a live taker: one found stale crashed mid-takeover. Broken like a lock, atomically, so
    // two waiters that judged it cannot each break a guard and both hold one.
    const judged = inspect(guard);
    if (judged && isStale(judged, staleMs))
      await breakIfSame(guard, (seen) => sameStale(seen, judged, staleMs));
    return "busy";
  }
  try {
    // Under the guard the lock can only appear (a locker creates it) or be released fresh by its own live holder, never
    // be replaced: so a check and a removal by path are one step here. Moving it aside instead would empty the path
    // for a moment whenever it is not the one judged, and a locker could create a second lock beside its holder.
    const seen = inspect(lock);
    if (!seen || !stillSame(seen)) return "changed";
    await rm(lock, { recursive: true, force: true });
    return "removed";
  } finally {
    // Only our own guard: one broken while we stalled belongs to another taker now.
    if (inspect(guard)?.owner === token) removeNow(guard);
  }
}

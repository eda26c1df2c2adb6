// Damage found by reads whose caller had no tool result to put it in (the sweep, the monitor, a slot read behind an
// agent read), kept per team until a listing hands it on. See specs/storage.md (Damaged files).

/**
 * Whether `warning` already tells what the damage note `note` says: the note itself, or the same moved-aside copy (a
 * listing describes an unreadable agent in its own words, naming the copy its file was moved to).
 */
function tells(warning: string, note: string): boolean {
  if (warning.includes(note)) return true;
  const copy = / moved aside to (\S+)/.exec(note)?.[1];
  return copy !== undefined && warning.includes(copy);
}

export class DamageNotes {
  private readonly notes = new Map<string, Set<string>>();

  /** Remember a damaged file's warning for the team's next listing; returns `read` unchanged. */
  noted<T extends { kind: string; warning?: string }>(teamName: string, read: T): T {
    if (read.kind === "corrupt" && read.warning) {
      const notes = this.notes.get(teamName) ?? new Set<string>();
      notes.add(read.warning);
      this.notes.set(teamName, notes);
    }
    return read;
  }

  /** `warnings` plus the team's notes not already among them; the team's notes are handed on once. */
  handOn(teamName: string, warnings: readonly string[]): string[] {
    const notes = this.notes.get(teamName);
    this.notes.delete(teamName);
    const unseen = [...(notes ?? [])].filter((note) => !warnings.some((warning) => tells(warning, note)));
    return [...warnings, ...unseen];
  }
}

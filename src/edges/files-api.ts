/** What is at a path: a directory, a file, something else (a socket, a device), or nothing. */
export type EntryKind = "directory" | "file" | "other" | undefined;

/** The filesystem checks operations make on paths outside the state files (implemented in files.ts). */
export interface FilesApi {
  /**
   * What is at `file`, following symlinks; with `follow: false` the link itself (a dangling link is "other").
   * Undefined when nothing is there or it cannot be looked at.
   */
  kind(file: string, options?: { follow?: boolean }): Promise<EntryKind>;
  /** The path with every symlink resolved; throws when it does not exist. */
  realpath(file: string): Promise<string>;
  /** Remove a file; nothing there is fine. */
  remove(file: string): Promise<void>;
}

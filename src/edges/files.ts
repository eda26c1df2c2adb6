import { lstat, realpath, rm, stat } from "node:fs/promises";
import type { EntryKind, FilesApi } from "./files-api.ts";

/** The local filesystem. */
export const localFiles: FilesApi = {
  async kind(file: string, options: { follow?: boolean } = {}): Promise<EntryKind> {
    const info = await (options.follow === false ? lstat(file) : stat(file)).catch(() => undefined);
    if (!info) return undefined;
    return info.isDirectory() ? "directory" : info.isFile() ? "file" : "other";
  },
  realpath: (file: string) => realpath(file),
  remove: (file: string) => rm(file, { force: true }),
};

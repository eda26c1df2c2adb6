// The project server's files in its storage directory: server.json (the record every process of the project finds
// it by), server.log (its output and our notes about it), and the lock that serialises starting and stopping it.
import { appendFile, chmod, mkdir, readFile, rename, stat } from "node:fs/promises";
import path from "node:path";
import { withFileLock } from "../state/lock.ts";
import type { StoragePaths } from "../state/paths.ts";
import type { ServerInfo } from "../state/schemas.ts";
import { ServerInfoStore } from "../state/server-info-store.ts";

const LOG_TAIL_LINES = 15;
const LOG_ROTATE_BYTES = 5 * 1024 * 1024;

export type ServerLog = (level: "info" | "warn", message: string) => void;

export class ServerFiles {
  private readonly infoStore: ServerInfoStore;

  constructor(
    private readonly paths: StoragePaths,
    private readonly projectRoot: string,
    private readonly log?: ServerLog,
  ) {
    this.infoStore = new ServerInfoStore(paths);
  }

  get logPath(): string {
    return this.paths.serverLog(this.projectRoot);
  }

  private get dir(): string {
    return this.paths.serverDir(this.projectRoot);
  }

  async read(): Promise<ServerInfo | undefined> {
    const read = await this.infoStore.read(this.projectRoot);
    // Said once: the damaged file is moved aside, and the next read finds none.
    if (read.kind === "corrupt")
      await this.note("warn", `${read.warning}; looking for our server by its ports`);
    return read.kind === "ok" ? read.value : undefined;
  }

  /** server.json holds the password: 0600 in a 0700 directory, whatever the umask or an older version left. */
  async ensureDir(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
  }

  /** Under server.json's own lock (ServerInfoStore), the one recountActiveSessions updates it under. */
  async write(info: ServerInfo): Promise<void> {
    await this.ensureDir();
    await this.infoStore.write(this.projectRoot, info);
  }

  async remove(): Promise<void> {
    await this.infoStore.remove(this.projectRoot);
  }

  /** `work` holding the lock that serialises starting and stopping the project's server. */
  async underStartLock<T>(work: () => Promise<T>, maxWaitMs: number): Promise<T> {
    await this.ensureDir();
    return withFileLock(path.join(this.dir, "start"), work, { maxWaitMs });
  }

  /** A line in the server log (never a password): what was decided about the server, and why. */
  async note(level: "info" | "warn", message: string): Promise<void> {
    this.log?.(level, message);
    await this.ensureDir()
      .then(() =>
        appendFile(this.logPath, `=== opencode-teams ${new Date().toISOString()}: ${message} ===\n`, {
          mode: 0o600,
        }),
      )
      .catch(() => {});
  }

  async rotateLog(): Promise<void> {
    try {
      if ((await stat(this.logPath)).size > LOG_ROTATE_BYTES) await rename(this.logPath, `${this.logPath}.1`);
    } catch {
      // no log yet
    }
  }

  /** The log's last lines written after `fromByte`. */
  async logTail(fromByte: number): Promise<string> {
    try {
      const text = (await readFile(this.logPath)).subarray(fromByte).toString("utf8");
      const lines = text.split("\n").filter((line) => line.trim() !== "");
      return lines.slice(-LOG_TAIL_LINES).join("\n");
    } catch {
      return "";
    }
  }
}

import { mkdirSync } from "node:fs";
import { chmod, mkdir, stat } from "node:fs/promises";

/** State files hold prompts, notes and the server's password: only their owner may read them (specs/storage.md). */
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** `mkdir -p` whose new directories only their owner can enter. */
export async function makePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** The same with a blocking call, for a critical section that must not yield (see `withFileLock`). */
export function makePrivateDirNow(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** Take group and other access off a directory made before modes were set (an older install). Whether it changed. */
export async function tightenDir(dir: string): Promise<boolean> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory() || (info.mode & 0o077) === 0) return false;
  await chmod(dir, PRIVATE_DIR_MODE);
  return true;
}

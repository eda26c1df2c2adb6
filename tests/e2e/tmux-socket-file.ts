import { rmSync } from "node:fs";
import path from "node:path";

/** tmux leaves the socket file of a private server behind after kill-server; remove ours. */
export function removeSocketFile(socket: string): void {
  const dir = path.join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`);
  rmSync(path.join(dir, socket), { force: true });
}

import type { PaneRef, PaneSpec, TmuxApi } from "./tmux-api.ts";

export class TmuxError extends Error {
  override name = "TmuxError";
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** TmuxApi over the tmux binary. Arguments go to tmux as argv (no shell), so names need no quoting here. */
export class TmuxCli implements TmuxApi {
  constructor(private readonly binary = "tmux") {}

  private async run(socket: string | undefined, args: string[]): Promise<RunResult> {
    const argv = [this.binary, ...(socket ? ["-L", socket] : []), ...args];
    let child: ReturnType<typeof Bun.spawn>;
    try {
      child = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    } catch (error) {
      throw new TmuxError(`cannot run tmux: ${error instanceof Error ? error.message : String(error)}`);
    }
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout as ReadableStream).text(),
      new Response(child.stderr as ReadableStream).text(),
      child.exited,
    ]);
    return { code, stdout, stderr };
  }

  private async must(socket: string | undefined, args: string[]): Promise<string> {
    const result = await this.run(socket, args);
    if (result.code !== 0)
      throw new TmuxError(`tmux ${args[0]} failed: ${result.stderr.trim() || `exit ${result.code}`}`);
    return result.stdout;
  }

  async available(): Promise<boolean> {
    try {
      return (await this.run(undefined, ["-V"])).code === 0;
    } catch {
      return false;
    }
  }

  async openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number }> {
    const envArgs = Object.entries(spec.env ?? {}).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
    const format = ["-P", "-F", "#{pane_id} #{pane_pid}"];
    const target = `${spec.session}:${spec.window}`;
    let created: string;
    const hasSession = (await this.run(spec.socket, ["has-session", "-t", `=${spec.session}`])).code === 0;
    if (!hasSession) {
      created = await this.must(spec.socket, [
        "new-session",
        "-d",
        "-s",
        spec.session,
        "-n",
        spec.window,
        "-c",
        spec.cwd,
        ...envArgs,
        ...format,
        "--",
        ...spec.command,
      ]);
    } else {
      const windows = await this.must(spec.socket, [
        "list-windows",
        "-t",
        `=${spec.session}`,
        "-F",
        "#{window_name}",
      ]);
      const hasWindow = windows.split("\n").includes(spec.window);
      created = hasWindow
        ? await this.must(spec.socket, [
            "split-window",
            "-d",
            "-t",
            target,
            "-c",
            spec.cwd,
            ...envArgs,
            ...format,
            "--",
            ...spec.command,
          ])
        : await this.must(spec.socket, [
            "new-window",
            "-d",
            "-t",
            `=${spec.session}:`,
            "-n",
            spec.window,
            "-c",
            spec.cwd,
            ...envArgs,
            ...format,
            "--",
            ...spec.command,
          ]);
    }
    const [paneId, pidText] = created.trim().split(" ");
    if (!paneId?.startsWith("%") || !pidText)
      throw new TmuxError(`tmux did not report the new pane: ${created.trim()}`);
    await this.must(spec.socket, ["select-pane", "-t", paneId, "-T", spec.title]);
    for (const [name, value] of Object.entries(spec.options ?? {})) {
      await this.must(spec.socket, ["set-option", "-p", "-t", paneId, `@${name}`, value]);
    }
    await this.run(spec.socket, ["select-layout", "-t", target, "tiled"]);
    return { paneId, panePid: Number(pidText) };
  }

  async paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown"> {
    let result: RunResult;
    try {
      result = await this.run(ref.socket, [
        "display-message",
        "-p",
        "-t",
        ref.paneId,
        "#{pane_id} #{pane_dead}",
      ]);
    } catch {
      return "unknown";
    }
    if (result.code !== 0) {
      // A missing pane and a server that is not running both mean the pane is gone.
      return /can't find|no server running|not found|error connecting/i.test(result.stderr)
        ? "gone"
        : "unknown";
    }
    const [id, dead] = result.stdout.trim().split(" ");
    if (id !== ref.paneId) return "gone";
    return dead === "1" ? "gone" : "alive";
  }

  async sendText(ref: PaneRef, text: string): Promise<void> {
    await this.must(ref.socket, ["send-keys", "-t", ref.paneId, "-l", text]);
    await this.must(ref.socket, ["send-keys", "-t", ref.paneId, "Enter"]);
  }

  async closePane(ref: PaneRef): Promise<void> {
    if ((await this.paneState(ref)) === "gone") return;
    // `opencode attach` may ignore SIGHUP: interrupt it first, then remove the pane.
    await this.run(ref.socket, ["send-keys", "-t", ref.paneId, "C-c"]);
    await this.run(ref.socket, ["kill-pane", "-t", ref.paneId]);
  }
}

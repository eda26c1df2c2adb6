// Running the tmux binary: one client process per call, the caller's environment without a $TMUX that would point a
// private socket's client at another server, secrets on stdin rather than in argv.
import { quoteTmuxArg } from "./tmux-syntax.ts";

export class TmuxError extends Error {
  override name = "TmuxError";
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class TmuxRunner {
  constructor(
    private readonly binary: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  private clientEnv(socket: string | undefined): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(this.env)) if (value !== undefined) env[key] = value;
    // $TMUX would point the client at the server this process runs inside; a private socket must not see it.
    if (socket) {
      delete env.TMUX;
      delete env.TMUX_PANE;
    }
    return env;
  }

  async run(socket: string | undefined, args: string[], stdin?: string): Promise<RunResult> {
    const argv = [this.binary, ...(socket ? ["-L", socket] : []), ...args];
    let child: Bun.Subprocess<"pipe" | "ignore", "pipe", "pipe">;
    try {
      child = Bun.spawn(argv, {
        stdin: stdin === undefined ? "ignore" : "pipe",
        stdout: "pipe",
        stderr: "pipe",
        env: this.clientEnv(socket),
      });
    } catch (error) {
      throw new TmuxError(`cannot run tmux: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (stdin !== undefined && child.stdin && typeof child.stdin !== "number") {
      child.stdin.write(stdin);
      await child.stdin.end();
    }
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { code, stdout, stderr };
  }

  async must(socket: string | undefined, args: string[], stdin?: string, label = args[0]): Promise<string> {
    const result = await this.run(socket, args, stdin);
    if (result.code !== 0) {
      throw new TmuxError(`tmux ${label} failed: ${result.stderr.trim() || `exit ${result.code}`}`);
    }
    return result.stdout;
  }

  /** Run one tmux command; with `env`, through stdin so the values stay out of argv. */
  async command(socket: string | undefined, args: string[], env: Record<string, string>) {
    const envArgs = Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
    const [name, ...rest] = args;
    if (!name) throw new TmuxError("empty tmux command");
    if (envArgs.length === 0) return this.must(socket, args);
    const line = [name, ...envArgs, ...rest].map(quoteTmuxArg).join(" ");
    // source-file needs a running server; start-server in the same client keeps one up for the command that follows.
    return this.must(socket, ["start-server", ";", "source-file", "-"], `${line}\n`, name);
  }
}

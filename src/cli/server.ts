import type { ServerReport } from "../edges/server-report.ts";
import type { TeamsContext } from "../operations/context.ts";

export interface ServerCommandResult {
  /** Process exit code: 0 when the command did what it says (a stop with nothing to stop included). */
  code: number;
  output: ServerReport | { stopped: boolean; detail: string };
  text: string;
}

/** `opencode-teams server status|stop`: look at the project's server, or stop it (only a pid verified ours). */
export async function runServerCommand(
  ctx: TeamsContext,
  action: string | undefined,
): Promise<ServerCommandResult> {
  const control = ctx.edges.serverControl;
  if (!control) throw new Error("this process cannot reach the project server");
  if (action === "status") {
    const report = await control.report();
    const ok = report.state === "running" || report.state === "none" || report.state === "stopped";
    return { code: ok ? 0 : 1, output: report, text: `server: ${report.state}: ${report.detail}` };
  }
  if (action === "stop") {
    const outcome = await control.stop("`opencode-teams server stop`");
    return { code: 0, output: outcome, text: outcome.detail };
  }
  throw new Error("usage: opencode-teams server status|stop");
}

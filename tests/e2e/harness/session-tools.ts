/**
 * Driving our tools through a session, and keeping helper processes from outliving the process that started them.
 * No bun:test imports: scripts/demo.ts uses these outside the test runner.
 */
import { spawn } from "node:child_process";
import type { OpencodeServer, ToolResultInfo } from "./opencode-server.ts";

/** A tool's JSON output; throws when the call did not complete. */
export function toolOutput(result: ToolResultInfo | undefined): unknown {
  if (!result) throw new Error("no tool result");
  if (result.status !== "completed")
    throw new Error(`tool ${result.tool} ${result.status}: ${result.error ?? ""}`);
  return JSON.parse(result.output ?? "null");
}

/**
 * The prompt that makes a session call one tool. The `@@call` line is what the scripted mock model obeys (it ignores
 * other lines); the sentence before it is what a real model obeys (it is told to ignore the `@@` line).
 */
export function toolPrompt(tool: string, args: unknown): string {
  const json = JSON.stringify(args);
  return [
    `Call the tool \`${tool}\` once with exactly these arguments, then reply with its result and do nothing else: ${json}`,
    "(The next line is for a scripted test model; ignore it.)",
    `@@call ${tool} ${json}`,
  ].join("\n");
}

/** Have `sessionId` call `tool` with `args` (one model turn) and return the parsed output of that new call. */
export async function callTool(
  server: OpencodeServer,
  sessionId: string,
  tool: string,
  args: unknown,
  opts: { timeoutMs?: number } = {},
): Promise<unknown> {
  const before = (await server.toolResults(sessionId, tool)).length;
  await server.promptAndWait(sessionId, toolPrompt(tool, args), { timeoutMs: opts.timeoutMs ?? 80_000 });
  const results = await server.toolResults(sessionId, tool);
  if (results.length <= before) {
    throw new Error(
      `session ${sessionId} did not call ${tool}; it answered: ${await server.lastAssistantText(sessionId)}`,
    );
  }
  return toolOutput(results[before]);
}

/**
 * Run `command` (sh) once this process is gone, however it went (crash, Ctrl-C, SIGKILL). A detached `sh` polls our
 * pid; it exits by itself once `alsoWatch` (if given) has exited first, and the returned function cancels it.
 */
export function onProcessGone(command: string, alsoWatch?: number): () => void {
  const script = [
    `while kill -0 ${process.pid} 2>/dev/null; do`,
    alsoWatch !== undefined ? `  kill -0 ${alsoWatch} 2>/dev/null || exit 0` : "  :",
    "  sleep 1",
    "done",
    command,
  ].join("\n");
  const watcher = spawn("sh", ["-c", script], { stdio: "ignore", detached: true });
  watcher.unref();
  return () => {
    if (watcher.pid === undefined) return;
    try {
      process.kill(watcher.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
}

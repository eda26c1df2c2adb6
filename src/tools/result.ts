import type { ToolResult } from "@opencode-ai/plugin";
import type { Logger } from "../operations/context.ts";
import { failureFromError, type OpResult } from "../operations/result.ts";

/**
 * The one shape every tool returns: `output` is the JSON the tool's contract names (models parse it), `title` a short
 * line for the TUI. Contract errors come back as `{ success: false, error }`; an exception is a bug, but it is still
 * turned into a result so one bad call never takes down the host OpenCode process.
 */
export async function runTool<T extends object>(
  toolName: string,
  log: Logger,
  run: () => Promise<OpResult<T>>,
  title: (result: T) => string,
): Promise<ToolResult> {
  let result: OpResult<T>;
  try {
    result = await run();
  } catch (error) {
    log("error", `${toolName} threw`, {
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
    result = failureFromError(error, toolName);
  }
  return {
    output: JSON.stringify(result),
    title: result.success ? title(result) : `${toolName} failed: ${truncate(result.error, 80)}`,
    metadata: { success: result.success },
  };
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

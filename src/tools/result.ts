import type { ToolContext, ToolDefinition, ToolResult } from "@opencode-ai/plugin";
import { collectWarnings } from "../operations/call-warnings.ts";
import type { Logger } from "../operations/context.ts";
import { type Failure, fail, failureFromError, type OpResult } from "../operations/result.ts";

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
    const { value, warnings } = await collectWarnings(run);
    result = withWarnings(value, warnings);
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

/** Warnings raised on the way (call-warnings.ts) join the ones the operation returned, each once. */
function withWarnings<T extends object>(result: OpResult<T>, raised: string[]): OpResult<T> {
  if (raised.length === 0) return result;
  const own = "warnings" in result && Array.isArray(result.warnings) ? (result.warnings as string[]) : [];
  return { ...result, warnings: [...raised.filter((w) => !own.includes(w)), ...own] };
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function hasCallerSession(context: ToolContext | undefined): boolean {
  const session: unknown = context?.sessionID;
  return typeof session === "string" && session.trim() !== "";
}

/**
 * Every tool acts for the session that calls it (a leader is the session that created its team): a call without one
 * is refused here, once for all tools, before any tool runs. An empty session id would otherwise found a team that any
 * other session-less call could then lead.
 */
export function requireCallerSession(
  tools: Record<string, ToolDefinition>,
  log: Logger,
): Record<string, ToolDefinition> {
  const refused = (): Promise<Failure> =>
    Promise.resolve(
      fail(
        "This call carries no OpenCode session id, so its caller cannot be identified; nothing was done. Call the tool from an OpenCode session (a leader from the session that created the team).",
      ),
    );
  return Object.fromEntries(
    Object.entries(tools).map(([name, definition]) => [
      name,
      {
        ...definition,
        execute: (args, context) =>
          hasCallerSession(context)
            ? definition.execute(args, context)
            : runTool(name, log, refused, () => ""),
      } satisfies ToolDefinition,
    ]),
  );
}

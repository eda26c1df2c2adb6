import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Warnings raised deep inside an operation (a damaged file repaired on the way) for the result of the tool call that
 * caused them, without threading a list through every function between the tool and the repair.
 */
const sink = new AsyncLocalStorage<string[]>();

/** Run `fn` and collect what `warnCaller` raised during it (and only during it: parallel calls keep their own). */
export async function collectWarnings<T>(fn: () => Promise<T>): Promise<{ value: T; warnings: string[] }> {
  const warnings: string[] = [];
  const value = await sink.run(warnings, fn);
  return { value, warnings };
}

/** Add a warning to the current tool call's result; false when no tool call is collecting (the CLI, the sweep). */
export function warnCaller(text: string): boolean {
  const warnings = sink.getStore();
  if (!warnings) return false;
  if (!warnings.includes(text)) warnings.push(text);
  return true;
}

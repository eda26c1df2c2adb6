import { boundText, MESSAGE_TEXT_MAX } from "../bounded-text.ts";
import { InvalidNameError } from "../state/paths.ts";

export type Failure = { success: false; error: string; warnings?: string[] };
export type Success<T extends object> = { success: true } & T;
export type OpResult<T extends object> = Success<T> | Failure;

/** A failure; its error and warnings, which may quote what a caller or an agent wrote, are bounded. */
export function fail(message: string, warnings: string[] = []): Failure {
  const error = boundText(message, MESSAGE_TEXT_MAX);
  return warnings.length > 0
    ? { success: false, error, warnings: warnings.map((warning) => boundText(warning, MESSAGE_TEXT_MAX)) }
    : { success: false, error };
}

/** An error a caller can fix by changing its input; its message goes back as is. */
export class CallerError extends Error {
  override name = "CallerError";
}

/** The text of anything thrown, for a warning or an error message. */
export function errorText(error: unknown): string {
  return boundText(error instanceof Error ? error.message : String(error), MESSAGE_TEXT_MAX);
}

/** Caller mistakes become their message; anything else is a bug, reported without taking down the host process. */
export function failureFromError(error: unknown, what: string): Failure {
  if (error instanceof InvalidNameError || error instanceof CallerError) return fail(error.message);
  return fail(`${what} failed unexpectedly: ${errorText(error)}`);
}

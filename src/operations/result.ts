import { InvalidNameError } from "../state/paths.ts";

export type Failure = { success: false; error: string; warnings?: string[] };
export type Success<T extends object> = { success: true } & T;
export type OpResult<T extends object> = Success<T> | Failure;

export function fail(error: string, warnings: string[] = []): Failure {
  return warnings.length > 0 ? { success: false, error, warnings } : { success: false, error };
}

/** An error a caller can fix by changing its input; its message goes back as is. */
export class CallerError extends Error {
  override name = "CallerError";
}

/** The text of anything thrown, for a warning or an error message. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Caller mistakes become their message; anything else is a bug, reported without taking down the host process. */
export function failureFromError(error: unknown, what: string): Failure {
  if (error instanceof InvalidNameError || error instanceof CallerError) return fail(error.message);
  return fail(`${what} failed unexpectedly: ${errorText(error)}`);
}

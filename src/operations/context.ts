import type { Clock } from "../clock.ts";
import type { TeamsOptions } from "../options.ts";
import type { TeamStore } from "../state/team-store.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
export type Logger = (level: LogLevel, message: string, extra?: Record<string, unknown>) => void;

/** What every operation needs: the project's state, the time, the settings and somewhere to log. */
export interface TeamsContext {
  projectRoot: string;
  store: TeamStore;
  clock: Clock;
  options: TeamsOptions;
  log: Logger;
}

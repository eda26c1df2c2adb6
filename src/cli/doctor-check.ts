export type CheckLevel = "ok" | "warn" | "fail";

/** One line of the doctor's report; each check lives in the module that knows its subject. */
export interface Check {
  name: string;
  level: CheckLevel;
  detail: string;
  /** What to do about it, when something is to be done. */
  fix?: string;
}

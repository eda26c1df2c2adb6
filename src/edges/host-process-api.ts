/** Processes of this host by pid: what operations ask of them and do to them (implemented in process-info.ts). */
export interface ProcessApi {
  /** This process and its host, as a claim records its claimant. */
  readonly self: { pid: number; host: string };
  /** argv of a running process, or undefined when it is gone or cannot be read. */
  commandLine(pid: number): Promise<string[] | undefined>;
  /** The parent pid of a running process; undefined when it is gone or cannot be read. */
  parent(pid: number): Promise<number | undefined>;
  /** Direct children of `pid` ([] where they cannot be listed). */
  children(pid: number): Promise<number[]>;
  /** Alive and not a zombie. */
  running(pid: number): boolean;
  /**
   * SIGTERM, then SIGKILL after `graceMs`; true once the process is gone. `isOurs` is asked right before each signal
   * (the pid may have passed to another process meanwhile): once it says no, nothing more is sent and the result is
   * false.
   */
  terminate(pid: number, graceMs?: number, isOurs?: () => Promise<boolean>): Promise<boolean>;
  /** Wait up to `ms` for a process to exit by itself; true once it is gone. */
  waitForExit(pid: number, ms: number): Promise<boolean>;
}

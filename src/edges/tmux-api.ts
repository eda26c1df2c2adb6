/** Where a pane goes and what runs in it. */
export interface PaneSpec {
  /** tmux server socket name (`tmux -L`), undefined for the user's default server. */
  socket?: string;
  /** tmux session name; created detached when missing. */
  session: string;
  /** Window name inside that session: one window per team, never the user's current window. */
  window: string;
  cwd: string;
  /** argv of the pane's own command (not typed into a shell). */
  command: string[];
  /** Extra environment for the pane's command (secrets go here, never into argv). */
  env?: Record<string, string>;
  title: string;
  /** `@name` user options set on the pane (e.g. @opencode_session_id, @agent_id). */
  options?: Record<string, string>;
  /** `select-layout` applied to the window after the pane is added; default "tiled". */
  layout?: string;
}

export interface PaneRef {
  socket?: string;
  paneId: string;
}

/** A pane found by the `@agent_id` option set on it at spawn. */
export interface MarkedPane {
  paneId: string;
  panePid: number;
  /** Its `@opencode_session_id` option, when set. */
  sessionId: string | undefined;
}

/** The tmux operations the plugin needs; the real one (tmux.ts) shells out to the tmux binary. */
export interface TmuxApi {
  /** tmux is installed and runnable. */
  available(): Promise<boolean>;
  /**
   * The name of the tmux session this process runs inside ($TMUX / $TMUX_PANE on the default server), or undefined
   * when it runs outside tmux.
   */
  currentSession(): Promise<string | undefined>;
  /** Open a pane running `spec.command`; resolves with its id (e.g. "%12") and the pid of its process. */
  openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number }>;
  /** "alive": the pane exists and its process runs; "gone": it does not; "unknown": tmux could not be asked. */
  paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown">;
  /**
   * Ids of the panes whose process still runs on a tmux server (one call for all of them); an empty set when that
   * server is not running; undefined when tmux could not be asked.
   */
  livePanes(socket: string | undefined): Promise<Set<string> | undefined>;
  /**
   * The pane on a tmux server whose `@agent_id` option is `agentId` (the mark spawn sets, so the pane is provably the
   * agent's whatever its id); undefined when no pane carries it or that server is not running. Throws when tmux could
   * not be asked.
   */
  findAgentPane(socket: string | undefined, agentId: string): Promise<MarkedPane | undefined>;
  /** Type text into a pane (the prompt-delivery fallback). */
  sendText(ref: PaneRef, text: string): Promise<void>;
  /**
   * Send C-c (unless `interrupt` is false: in `opencode attach` it cancels the session's turn), then kill the pane;
   * resolves once it is gone.
   */
  closePane(ref: PaneRef, options?: { interrupt?: boolean }): Promise<void>;
}

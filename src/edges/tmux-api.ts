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

/**
 * A pane that belongs to one agent. tmux pane ids restart at %0 when a tmux server restarts, so an id alone may name
 * someone else's pane: the pane is the agent's only while it carries `@agent_id` = `agentId` and lives on the tmux
 * server recorded when it opened (`server`; a record without it is judged by `@agent_id` alone).
 */
export interface PaneRef {
  socket?: string;
  paneId: string;
  agentId: string;
  server?: string;
}

/** The live panes of one tmux server: its identity and, per pane id, the pane's `@agent_id` ("" when unset). */
export interface LivePanes {
  /** Identity of the running server (see `PaneRef.server`); undefined when no server runs. */
  server: string | undefined;
  owners: Map<string, string>;
}

/** Whether the pane `ref` names is live in `live` and still the agent's (see PaneRef). */
export function ownsLivePane(live: LivePanes, ref: PaneRef): boolean {
  return (
    live.owners.get(ref.paneId) === ref.agentId && (ref.server === undefined || live.server === ref.server)
  );
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
  /**
   * Open a pane running `spec.command`; resolves with its id (e.g. "%12"), the pid of its process and the identity
   * of the tmux server it runs on (changes when that server restarts).
   */
  openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }>;
  /**
   * "alive": the agent's pane exists and its process runs; "gone": it does not, or the pane with that id is not the
   * agent's (see PaneRef); "unknown": tmux could not be asked.
   */
  paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown">;
  /**
   * The panes whose process still runs on a tmux server, with their owners (one call for all of them); no panes and
   * no server identity when that server is not running; undefined when tmux could not be asked.
   */
  livePanes(socket: string | undefined): Promise<LivePanes | undefined>;
  /**
   * The pane on a tmux server whose `@agent_id` option is `agentId` (the mark spawn sets, so the pane is provably the
   * agent's whatever its id); undefined when no pane carries it or that server is not running. Throws when tmux could
   * not be asked.
   */
  findAgentPane(socket: string | undefined, agentId: string): Promise<MarkedPane | undefined>;
  /** Type text into the agent's pane (the prompt-delivery fallback); throws, typing nothing, when it is not theirs. */
  sendText(ref: PaneRef, text: string): Promise<void>;
  /**
   * Send C-c (unless `interrupt` is false: in `opencode attach` it cancels the session's turn), then kill the pane;
   * resolves once it is gone. A pane that is not the agent's is gone for it and is never signalled.
   */
  closePane(ref: PaneRef, options?: { interrupt?: boolean }): Promise<void>;
}

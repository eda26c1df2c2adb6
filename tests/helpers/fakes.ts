import type { Event } from "@opencode-ai/sdk";
import type {
  MessageUsage,
  ModelRef,
  OpencodeApi,
  PendingRequest,
  PendingRequestRef,
  SessionActivity,
  SessionStatuses,
} from "../../src/edges/opencode-api.ts";
import {
  type LivePanes,
  type MarkedPane,
  ownsLivePane,
  type PaneRef,
  type PaneSpec,
  type TmuxApi,
} from "../../src/edges/tmux-api.ts";
import type { ModelSettings } from "../../src/edges/warmup-config.ts";

export interface FakeSession {
  id: string;
  title: string;
  directory: string;
  activity: SessionActivity;
  prompts: { text: string; model?: ModelRef; noReply?: boolean }[];
  messages: number;
  /** Its assistant messages' usage, as `GET /session/{id}/message` reports it. */
  usage: MessageUsage[];
  /** The session that started it (a subagent's session). */
  parentID?: string;
}

/** An in-memory OpenCode server for unit tests. Flip `down` to make every call fail like an unreachable server. */
export class FakeOpencode implements OpencodeApi {
  readonly baseUrl: string;
  sessions = new Map<string, FakeSession>();
  down = false;
  /** Make promptAsync fail this many more times (prompt delivery retries). */
  failPrompts = 0;
  /** promptAsync succeeds but the message never lands (delivery verification). */
  dropPrompts = false;
  calls: string[] = [];
  /**
   * The directory the client names by default (the project root). Like the real server, sessionStatuses() lists a
   * session only under the directory it was created in.
   */
  directory = "/";
  /** Directories whose status request fails, and how (a deleted `cwd`, a request that timed out). */
  failingDirectories = new Map<string, string>();
  /** What modelSettings() answers: the resolved config's model and provider filters. */
  settings: ModelSettings = { model: "mock/mock-model" };
  private nextId = 1;
  private listeners = new Set<(event: Event | null) => void>();

  constructor(baseUrl = "http://127.0.0.1:28999") {
    this.baseUrl = baseUrl;
  }

  private check(what: string): void {
    this.calls.push(what);
    if (this.down) throw new Error(`${what} failed: connect ECONNREFUSED ${this.baseUrl}`);
  }

  private session(id: string): FakeSession {
    const session = this.sessions.get(id);
    if (!session) throw new Error(`session ${id} failed (HTTP 404)`);
    return session;
  }

  addSession(partial: Partial<FakeSession> = {}): FakeSession {
    const session: FakeSession = {
      id: partial.id ?? `ses_fake${this.nextId++}`,
      title: partial.title ?? "",
      directory: partial.directory ?? this.directory,
      activity: partial.activity ?? "idle",
      prompts: [],
      messages: partial.messages ?? 0,
      usage: partial.usage ?? [],
      ...(partial.parentID ? { parentID: partial.parentID } : {}),
    };
    this.sessions.set(session.id, session);
    return session;
  }

  async healthy(): Promise<boolean> {
    return !this.down;
  }

  async sessionStatuses(directories: readonly string[] = [this.directory]): Promise<SessionStatuses> {
    // Like the real client, each directory is asked on its own: a failure is reported for it, not thrown.
    this.calls.push("sessionStatuses");
    const out: SessionStatuses = { statuses: {}, failed: {} };
    const answered = new Set<string>();
    for (const directory of directories) {
      const why = this.down
        ? `GET /session/status?directory=${directory} failed: connect ECONNREFUSED ${this.baseUrl}`
        : this.failingDirectories.get(directory);
      if (why === undefined) answered.add(directory);
      else out.failed[directory] = why;
    }
    for (const session of this.sessions.values())
      if (session.activity !== "idle" && answered.has(session.directory))
        out.statuses[session.id] = session.activity;
    return out;
  }

  async sessionExists(sessionId: string): Promise<boolean> {
    this.check(`sessionExists ${sessionId}`);
    return this.sessions.has(sessionId);
  }

  async sessionParent(sessionId: string): Promise<string | null> {
    this.check(`sessionParent ${sessionId}`);
    return this.sessions.get(sessionId)?.parentID ?? null;
  }

  async createSession(input: { title: string; directory: string }): Promise<{ id: string }> {
    this.check("createSession");
    return { id: this.addSession(input).id };
  }

  async modelSettings(): Promise<ModelSettings> {
    this.check("modelSettings");
    return this.settings;
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.check(`deleteSession ${sessionId}`);
    this.sessions.delete(sessionId);
  }

  async abortSession(sessionId: string): Promise<void> {
    this.check(`abortSession ${sessionId}`);
    const session = this.sessions.get(sessionId);
    if (session) session.activity = "idle";
  }

  async promptAsync(sessionId: string, text: string, options: { model?: ModelRef; noReply?: boolean } = {}) {
    this.check(`promptAsync ${sessionId}`);
    if (this.failPrompts > 0) {
      this.failPrompts--;
      throw new Error("prompt_async failed (HTTP 400)");
    }
    const session = this.session(sessionId);
    session.prompts.push({ text, ...options });
    if (!this.dropPrompts) session.messages += options.noReply ? 1 : 2;
  }

  async messageCount(sessionId: string): Promise<number> {
    this.check(`messageCount ${sessionId}`);
    return this.session(sessionId).messages;
  }

  /** What pendingRequests() lists (the server's `GET /permission` and `GET /question`). */
  pending: PendingRequest[] = [];

  async pendingRequests(): Promise<PendingRequest[]> {
    this.check("pendingRequests");
    return this.pending;
  }

  /** Answers given through answerPermission / answerQuestion, in order. */
  answers: { request: PendingRequestRef; response: string; message?: string; answers?: string[] }[] = [];

  async answerPermission(
    request: PendingRequestRef,
    response: "once" | "always" | "reject",
    message?: string,
  ): Promise<void> {
    this.check(`answerPermission ${request.requestId}`);
    this.session(request.sessionId);
    this.answers.push({ request, response, ...(message !== undefined ? { message } : {}) });
    this.settle(request.requestId);
  }

  async answerQuestion(request: PendingRequestRef, answers: readonly string[] | undefined): Promise<void> {
    this.check(`answerQuestion ${request.requestId}`);
    // `response`: the first answer (or "reject"), as a one-question answer reads; `answers`: all, when several.
    this.answers.push({
      request,
      response: answers?.[0] ?? "reject",
      ...(answers && answers.length > 1 ? { answers: [...answers] } : {}),
    });
    this.settle(request.requestId);
  }

  /** An answered request leaves the server's pending list, as it does on a real server. */
  private settle(requestId: string): void {
    this.pending = this.pending.filter((item) => item.properties.id !== requestId);
  }

  async userMessageTexts(sessionId: string): Promise<string[]> {
    this.check(`userMessageTexts ${sessionId}`);
    return this.dropPrompts ? [] : this.session(sessionId).prompts.map((prompt) => prompt.text);
  }

  async messageUsage(sessionId: string): Promise<MessageUsage[]> {
    this.check(`messageUsage ${sessionId}`);
    return [...this.session(sessionId).usage];
  }

  /** Deliver an event to every open stream. */
  emit(event: Event): void {
    for (const listener of this.listeners) listener(event);
  }

  /** End every open stream the way a server closing the connection does. */
  closeStreams(): void {
    for (const listener of this.listeners) listener(null);
  }

  get openStreams(): number {
    return this.listeners.size;
  }

  async *events(signal: AbortSignal): AsyncIterable<Event> {
    this.check("events");
    const queue: (Event | null)[] = [];
    let wake: (() => void) | undefined;
    const listener = (event: Event | null) => {
      queue.push(event);
      wake?.();
    };
    const onAbort = () => listener(null);
    this.listeners.add(listener);
    signal.addEventListener("abort", onAbort);
    try {
      while (!signal.aborted) {
        if (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        const next = queue.shift();
        if (next === null || next === undefined) return;
        yield next;
      }
    } finally {
      this.listeners.delete(listener);
      signal.removeEventListener("abort", onAbort);
    }
  }
}

export interface FakePane {
  spec: PaneSpec;
  paneId: string;
  panePid: number;
  /** Identity of the fake tmux server the pane lives on. */
  server: string;
  alive: boolean;
  typed: string[];
  /** C-c presses it received. */
  interrupts: number;
}

/**
 * An in-memory tmux. `installed = false` behaves like a PATH without tmux. Like tmux, it numbers panes afresh after
 * `restartServer()`, and a pane is an agent's only while its `@agent_id` option and server match the ref.
 */
export class FakeTmux implements TmuxApi {
  installed = true;
  failOpen = false;
  panes = new Map<string, FakePane>();
  /** The tmux session this process "runs inside" ($TMUX); undefined: outside tmux. */
  insideSession: string | undefined;
  /** Called for text typed into a pane (e.g. to make the fake server see the typed prompt). */
  onType: ((pane: FakePane, text: string) => void) | undefined;
  private next = 1;
  private serverStarts = 1;

  get server(): string {
    return `7000:${this.serverStarts}`;
  }

  /** What `tmux kill-server` and a new server do: every pane goes, and pane ids start over. */
  restartServer(): void {
    this.panes.clear();
    this.serverStarts++;
    this.next = 1;
  }

  private owned(ref: PaneRef): FakePane | undefined {
    const pane = this.panes.get(ref.paneId);
    if (!pane?.alive) return undefined;
    const live: LivePanes = {
      server: pane.server,
      owners: new Map([[pane.paneId, pane.spec.options?.agent_id ?? ""]]),
    };
    return ownsLivePane(live, ref) ? pane : undefined;
  }

  async available(): Promise<boolean> {
    return this.installed;
  }

  async currentSession(): Promise<string | undefined> {
    return this.insideSession;
  }

  async openPane(spec: PaneSpec): Promise<{ paneId: string; panePid: number; server: string }> {
    if (!this.installed) throw new Error("cannot run tmux: executable not found");
    if (this.failOpen) throw new Error("tmux split-window failed: no space for new pane");
    const paneId = `%${this.next++}`;
    const pane: FakePane = {
      spec,
      paneId,
      panePid: 40_000 + this.next,
      server: this.server,
      alive: true,
      typed: [],
      interrupts: 0,
    };
    this.panes.set(paneId, pane);
    return { paneId, panePid: pane.panePid, server: pane.server };
  }

  /** A pane as the plugin opens an agent's: marked with the agent's id (`@agent_id`), titled `title`. */
  openAgentPane(
    agentId: string,
    title: string,
  ): Promise<{ paneId: string; panePid: number; server: string }> {
    const spec = { session: "s", window: "w", cwd: "/", command: ["x"], title };
    return this.openPane({ ...spec, options: { agent_id: agentId } });
  }

  async paneState(ref: PaneRef): Promise<"alive" | "gone" | "unknown"> {
    if (!this.installed) return "unknown";
    return this.owned(ref) ? "alive" : "gone";
  }

  /** How many times livePanes was asked (the sweep asks once per tmux server, not once per agent). */
  livePaneQueries = 0;

  async livePanes(_socket: string | undefined): Promise<LivePanes | undefined> {
    this.livePaneQueries++;
    if (!this.installed) return undefined;
    const alive = [...this.panes.values()].filter((pane) => pane.alive);
    return {
      server: alive.length > 0 ? this.server : undefined,
      owners: new Map(alive.map((pane) => [pane.paneId, pane.spec.options?.agent_id ?? ""])),
    };
  }

  async findAgentPane(socket: string | undefined, agentId: string): Promise<MarkedPane | undefined> {
    if (!this.installed) throw new Error("cannot run tmux: executable not found");
    for (const pane of this.panes.values()) {
      if (!pane.alive || pane.spec.socket !== socket || pane.spec.options?.agent_id !== agentId) continue;
      return { paneId: pane.paneId, panePid: pane.panePid, sessionId: pane.spec.options.opencode_session_id };
    }
    return undefined;
  }

  async sendText(ref: PaneRef, text: string): Promise<void> {
    const pane = this.owned(ref);
    if (!pane) throw new Error(`pane ${ref.paneId} is gone or no longer this agent's; nothing was typed`);
    pane.typed.push(text);
    this.onType?.(pane, text);
  }

  /** Panes closed without C-c (an agent ending its own run must not have its turn cancelled). */
  closedWithoutInterrupt: string[] = [];

  async closePane(ref: PaneRef, options: { interrupt?: boolean } = {}): Promise<void> {
    const pane = this.owned(ref);
    if (!pane) return;
    if (options.interrupt === false) this.closedWithoutInterrupt.push(ref.paneId);
    else pane.interrupts++;
    pane.alive = false;
  }
}

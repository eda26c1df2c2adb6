// A subagent an agent starts (its `task` tool) runs in a child session of its own (`parentID` is the agent's session)
// and asks its permissions there: those sessions count as the agent's. Their requests become the agent's waitingFor
// (keeping the child's session id, which the answer goes to), their work is the agent's sign of life; their errors and
// deletions are not the agent's (see asAgentSignal).
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import { jsonRecord } from "../../json-record.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";
import type { SessionOwner } from "../team/identity.ts";
import type { Signal } from "./signals.ts";

/** How far up a chain of subagents (a subagent's subagent...) a session is followed to its agent. */
const MAX_DEPTH = 4;
/** How many sessions' parents are remembered; the memory starts over when full (a parent never changes). */
const MAX_REMEMBERED = 5_000;
/** After the server could not be asked, how long mere signs of life do not ask again (requests always ask). */
const QUIET_AFTER_FAILURE_MS = 5_000;

/**
 * What `session.created` / `session.updated` say of a session (OpenCode 1.18): its parent in `info.parentID`, and for
 * a creation, the session with its title (the identity hook and the monitor both learn from it).
 */
export function sessionFromEvent(
  event: unknown,
): { sessionId: string; parentId: string | null; created?: CreatedSession } | undefined {
  const root = jsonRecord(event);
  if (root?.type !== "session.created" && root?.type !== "session.updated") return undefined;
  const info = jsonRecord(jsonRecord(root.properties)?.info);
  const sessionId = info?.id;
  if (typeof sessionId !== "string" || sessionId === "") return undefined;
  const parentId = typeof info?.parentID === "string" && info.parentID !== "" ? info.parentID : null;
  if (root.type !== "session.created") return { sessionId, parentId };
  const title = typeof info?.title === "string" ? info.title : undefined;
  return { sessionId, parentId, created: { sessionId, title } };
}

/** A session's creation as its event tells it. */
export interface CreatedSession {
  sessionId: string;
  /** Undefined when the event carried none. */
  title: string | undefined;
}

/**
 * A child session's signal as the agent's. Its busy and activity are the agent's signs of life (busy: at work); its
 * idle ends only its own request, and makes the agent idle only when the agent's own session is idle too (a task
 * tool's subagent finishing leaves the agent's turn running). Its error is not the agent's model failure: the task
 * tool hands it to the agent's model as the tool's result, and the agent's own turn errors if its model fails. Its
 * deletion is not the agent's death.
 */
function asAgentSignal(signal: Signal, agentSessionId: string): Signal | undefined {
  const child = signal.sessionId;
  switch (signal.kind) {
    case "busy":
      return { kind: "activity", sessionId: agentSessionId, source: signal.source, running: true };
    case "activity":
      return { kind: "activity", sessionId: agentSessionId, source: signal.source, running: signal.running };
    case "idle":
      return { kind: "idle", sessionId: agentSessionId, source: signal.source, child };
    case "waiting":
      return {
        kind: "waiting",
        sessionId: agentSessionId,
        request: { ...signal.request, sessionId: signal.request.sessionId ?? child },
      };
    case "answered":
      return { ...signal, sessionId: agentSessionId };
    default:
      return undefined;
  }
}

/** Which sessions started which, learned from events and, for a session met first, asked of the server. */
export class SessionFamily {
  private readonly parents = new Map<string, string | null>();
  /** Until when a sign of life of an unknown session does not ask the server (it just could not be asked). */
  private quietUntil = Number.NEGATIVE_INFINITY;

  constructor(private readonly ctx: TeamsContext) {}

  /** Remember the parent an event names. Returns the session when the event is its creation. */
  learn(event: unknown): CreatedSession | undefined {
    const found = sessionFromEvent(event);
    if (!found) return undefined;
    this.remember(found.sessionId, found.parentId);
    return found.created;
  }

  /**
   * A session no agent owns, mapped to the agents whose session started it (directly or up to MAX_DEPTH levels up),
   * with its signal as theirs; undefined when it is nobody's.
   */
  async asAgents(
    signal: Signal,
    owned: (sessionId: string) => Promise<readonly SessionOwner[]>,
  ): Promise<{ owners: readonly SessionOwner[]; signal: Signal } | undefined> {
    // A request or its reply must reach the leader even while the server answers badly; activity can wait.
    const mustAsk = signal.kind === "waiting" || signal.kind === "answered";
    let id = signal.sessionId;
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const parent = await this.parentOf(id, mustAsk);
      if (!parent) return undefined;
      const owners = await owned(parent);
      if (owners.length > 0) {
        const mapped = asAgentSignal(signal, parent);
        return mapped ? { owners, signal: mapped } : undefined;
      }
      id = parent;
    }
    return undefined;
  }

  private async parentOf(sessionId: string, mustAsk: boolean): Promise<string | null> {
    const known = this.parents.get(sessionId);
    if (known !== undefined) return known;
    if (!mustAsk && this.ctx.clock.now() < this.quietUntil) return null;
    const server = await this.ctx.edges.projectServer();
    if (!server) {
      this.quietUntil = this.ctx.clock.now() + QUIET_AFTER_FAILURE_MS;
      return null;
    }
    try {
      const parent = await server.sessionParent(sessionId);
      this.remember(sessionId, parent);
      return parent;
    } catch (error) {
      // Not remembered: a later event of the session asks again.
      this.quietUntil = this.ctx.clock.now() + QUIET_AFTER_FAILURE_MS;
      this.ctx.log("debug", "could not ask the project's server which session started a session", {
        session: sessionId,
        error: errorText(error),
      });
      return null;
    }
  }

  private remember(sessionId: string, parentId: string | null): void {
    if (this.parents.size >= MAX_REMEMBERED && !this.parents.has(sessionId)) this.parents.clear();
    this.parents.set(sessionId, parentId);
  }
}

/** Whether `sessionId` was started by `ancestorId` (or by a session it started, up to MAX_DEPTH levels), asking the server. */
export async function descendsFrom(
  server: OpencodeApi,
  sessionId: string,
  ancestorId: string,
): Promise<boolean> {
  let id = sessionId;
  for (let depth = 0; depth < MAX_DEPTH; depth++) {
    const parent = await server.sessionParent(id);
    if (!parent) return false;
    if (parent === ancestorId) return true;
    id = parent;
  }
  return false;
}

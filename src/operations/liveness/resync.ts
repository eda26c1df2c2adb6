// After a gap in the server's event stream (OpenCode keeps no replay), the monitor's state made to agree with what
// the server says now: each live agent's session status and its open permission or question requests.
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { AgentState } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "./heartbeat.ts";
import { pendingSignal, type Signal } from "./signals.ts";

/** What a resync needs of the monitor. */
export interface ResyncTarget {
  /** Apply one signal as the monitor applies an event's. */
  process(signal: Signal): Promise<void>;
  /** What the server last said each agent session is doing (see EventMonitor). */
  serverActivity: Map<string, "busy" | "idle">;
  /** The server answered with its session statuses. */
  counted(): void;
}

/**
 * Make state agree with `GET /session/status`, asking for every directory that has live agents: the server lists a
 * session's status only under the directory it was created in (the agent's `cwd`). A directory that did not answer
 * is left out; the others are still applied. Returns the live agents it looked at.
 */
export async function resyncAgents(
  ctx: TeamsContext,
  server: OpencodeApi,
  target: ResyncTarget,
): Promise<AgentState[]> {
  const live: AgentState[] = [];
  for (const teamName of await ctx.store.listTeamNames()) {
    const { items } = await ctx.store.listAgentViews(teamName);
    for (const { state } of items) if (state.role !== "leader" && isLive(state.status)) live.push(state);
  }
  // The server answers for one directory at a time: the sessions' own (their agents' cwd).
  const directories = [...new Set(live.map((state) => state.cwd))];
  const { statuses, failed } = await server.sessionStatuses(directories);
  target.counted();
  for (const [directory, error] of Object.entries(failed)) {
    ctx.log("warn", "resync: the project's OpenCode server did not answer for a directory", {
      directory,
      error,
    });
  }
  for (const state of live) {
    // Unknown is not idle: the agents of a directory that did not answer keep the state they have.
    if (failed[state.cwd] !== undefined) continue;
    const activity = statuses[state.sessionId];
    if (activity === "busy" || activity === "retry") {
      await target.process({
        kind: "busy",
        sessionId: state.sessionId,
        source: "sdk_session_status",
        resync: true,
      });
    } else {
      target.serverActivity.set(state.sessionId, "idle");
      // Missing from the map means idle (or gone, which the sweep finds out); it is no sign of life.
      if (state.status === "active") {
        await target.process({
          kind: "idle",
          sessionId: state.sessionId,
          source: "sdk_session_status",
          resync: true,
        });
      }
    }
  }
  await reconcileWaiting(server, live, directories, target);
  return live;
}

/** Requests asked or answered during a gap in the stream: the server's pending lists say which are open now. */
async function reconcileWaiting(
  server: OpencodeApi,
  live: readonly AgentState[],
  directories: readonly string[],
  target: ResyncTarget,
): Promise<void> {
  const pending = await server.pendingRequests(directories).catch(() => undefined);
  // A server without these lists (or one that did not answer) leaves waitingFor to the events and to idle.
  if (!pending) return;
  const open = new Map<string, Signal>();
  const openIds = new Set<string>();
  const agentSessions = new Set(live.map((state) => state.sessionId));
  for (const item of pending) {
    const signal = pendingSignal(item);
    if (signal?.kind !== "waiting") continue;
    openIds.add(signal.request.requestId);
    if (agentSessions.has(signal.sessionId)) open.set(signal.sessionId, signal);
    // Perhaps a subagent's session: the monitor finds the agent that started it (child-sessions.ts).
    else await target.process(signal);
  }
  for (const state of live) {
    const signal = open.get(state.sessionId);
    if (signal) await target.process(signal);
    // A request still open (a subagent's, kept with the agent) stays.
    else if (state.waitingFor && !openIds.has(state.waitingFor.requestId))
      await target.process({
        kind: "answered",
        sessionId: state.sessionId,
        requestId: state.waitingFor.requestId,
      });
  }
}

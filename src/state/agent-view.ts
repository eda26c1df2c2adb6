// An agent's durable state and its heartbeat slot read as one view, with the freshest heartbeat of the two.
import type { AgentState, HeartbeatRecord } from "./schemas.ts";
import type { ReadResult } from "./store.ts";

/** An agent's durable state together with its freshest liveness record. */
export interface AgentView {
  state: AgentState;
  heartbeat: HeartbeatRecord | undefined;
  /** The newer of the durable heartbeat and the slot's. */
  heartbeatTs: string;
}

export function effectiveHeartbeatTs(state: AgentState, heartbeat: HeartbeatRecord | undefined): string {
  if (!heartbeat) return state.heartbeatTs;
  return Date.parse(heartbeat.heartbeatTs) > Date.parse(state.heartbeatTs)
    ? heartbeat.heartbeatTs
    : state.heartbeatTs;
}

/** An agent file's read and its slot's, as one view (or the agent file's failure). */
export function viewOf(
  state: ReadResult<AgentState>,
  heartbeat: { record?: HeartbeatRecord; warning?: string },
) {
  if (state.kind !== "ok") return state;
  const usage = heartbeat.record?.usage;
  const view: AgentView = {
    // The slot holds the usage the event stream counts (specs/usage-and-budgets.md); a view shows it on the state.
    state: usage ? { ...state.value, usage } : state.value,
    heartbeat: heartbeat.record,
    heartbeatTs: effectiveHeartbeatTs(state.value, heartbeat.record),
  };
  return { kind: "ok" as const, value: view, warnings: heartbeat.warning ? [heartbeat.warning] : [] };
}

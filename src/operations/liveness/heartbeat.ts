import { LockDirectoryMissingError } from "../../state/lock-instance.ts";
import { assertAgentId, assertTeamName, InvalidNameError } from "../../state/paths.ts";
import type {
  AgentState,
  AgentStatus,
  HeartbeatMetadata,
  HeartbeatRecord,
  HeartbeatSource,
} from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError, fail, type OpResult } from "../result.ts";
import { loadTeam } from "../team/identity.ts";

/** Largest metadata object one heartbeat may carry (bytes of its JSON). */
export const HEARTBEAT_METADATA_LIMIT = 8 * 1024;
/** Metadata is merged across heartbeats; only the most recently set keys are kept. */
export const HEARTBEAT_METADATA_MAX_KEYS = 32;

export interface HeartbeatInput {
  agentId: string;
  teamName: string;
  status?: "active" | "idle";
  metadata?: HeartbeatMetadata;
}

export interface HeartbeatOutput {
  heartbeatTs: string;
  nextDeadline: string;
  agentStatus: AgentStatus;
}

/**
 * Keys that are JavaScript object internals: as a key of the merged metadata they would change its prototype or be
 * refused by the record's schema with an unreadable error, so they are refused up front.
 */
const RESERVED_METADATA_KEYS = ["__proto__", "constructor", "prototype"];

function metadataRefusal(metadata: HeartbeatMetadata): string | undefined {
  const bytes = jsonBytes(metadata);
  if (bytes > HEARTBEAT_METADATA_LIMIT) {
    return `Heartbeat metadata is too large: ${bytes} bytes (limit ${HEARTBEAT_METADATA_LIMIT}). Send a short summary instead.`;
  }
  const reserved = RESERVED_METADATA_KEYS.find((key) => Object.hasOwn(metadata, key));
  if (reserved === undefined) return undefined;
  return `Heartbeat metadata key "${reserved}" is not allowed (it names a JavaScript object internal): use another key, e.g. "${reserved.replace(/_/g, "")}Info".`;
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/**
 * New keys win and move to the end; the oldest keys go first when there are too many or the whole is too big, so
 * an agent that reports progress under ever new keys cannot grow its record without bound.
 */
export function mergeMetadata(
  previous: HeartbeatMetadata | undefined,
  next: HeartbeatMetadata | undefined,
): HeartbeatMetadata | undefined {
  if (!next) return previous;
  const merged = new Map<string, unknown>(Object.entries(previous ?? {}));
  for (const [key, value] of Object.entries(next)) {
    merged.delete(key);
    merged.set(key, value);
  }
  const keys = [...merged.keys()];
  while (keys.length > HEARTBEAT_METADATA_MAX_KEYS) merged.delete(keys.shift() as string);
  let out = Object.fromEntries(merged);
  while (jsonBytes(out) > HEARTBEAT_METADATA_LIMIT && merged.size > 0) {
    merged.delete(merged.keys().next().value as string);
    out = Object.fromEntries(merged);
  }
  return out;
}

/** The next liveness record. `event` says whether this is the agent's own sign of life (see `lastEventAt`). */
export function nextHeartbeat(
  previous: HeartbeatRecord | undefined,
  nowIso: string,
  source: HeartbeatSource,
  options: { event: boolean; metadata?: HeartbeatMetadata },
): HeartbeatRecord {
  const metadata = mergeMetadata(previous?.metadata, options.metadata);
  const lastEventAt = options.event ? nowIso : previous?.lastEventAt;
  return {
    version: 1,
    heartbeatTs: nowIso,
    source,
    // Every heartbeat counts, whoever writes it; callers hold the agent's lock so none is lost.
    updates: (previous?.updates ?? 0) + 1,
    ...(metadata ? { metadata } : {}),
    ...(lastEventAt ? { lastEventAt } : {}),
    // The usage counter's, kept across heartbeats (specs/usage-and-budgets.md).
    ...(previous?.usage ? { usage: previous.usage } : {}),
  };
}

/** Statuses the liveness machinery may still change; the others belong to kill (shutting_down) or are final. */
export function isLive(status: AgentStatus): boolean {
  return status === "spawning" || status === "active" || status === "idle";
}

/** The agent's run has not ended: it has a session the server is (or should be) running. */
export function isRunning(status: AgentStatus): boolean {
  return isLive(status) || status === "shutting_down";
}

function statusAfterHeartbeat(current: AgentStatus, requested: HeartbeatInput["status"]): AgentStatus {
  // A kill in progress owns the status; a heartbeat must not pull the agent back out of it.
  if (current === "shutting_down") return current;
  if (requested) return requested;
  return current === "spawning" ? "active" : current;
}

/**
 * The explicit heartbeat (specs/heartbeat.md). The fast path rewrites only the fixed-size liveness slot; the durable agent file
 * is rewritten only when something durable changes (a status transition, or misses to reset).
 */
export async function heartbeat(
  ctx: TeamsContext,
  input: HeartbeatInput,
  sessionId: string,
): Promise<OpResult<HeartbeatOutput>> {
  assertTeamName(input.teamName);
  assertAgentId(input.agentId);
  const refused = input.metadata === undefined ? undefined : metadataRefusal(input.metadata);
  if (refused) return fail(refused);
  let outcome: OpResult<HeartbeatOutput> | undefined;
  try {
    // The lock must not create the agents directory: a heartbeat naming a team that does not exist leaves nothing.
    outcome = await ctx.store.withAgentLock(
      input.teamName,
      input.agentId,
      () => beat(ctx, input, sessionId),
      {
        createDir: false,
      },
    );
  } catch (error) {
    if (error instanceof LockDirectoryMissingError) {
      await loadTeam(ctx, input.teamName);
      return fail(notFound(input.agentId));
    }
    if (error instanceof CallerError || error instanceof InvalidNameError) throw error;
    // Lock timeouts land here too: the agent can simply retry on its next heartbeat.
    const details = error instanceof Error ? error.message : String(error);
    return fail(`Failed to update heartbeat: ${details}`);
  }
  // Undefined: no agent file (never was, or removed).
  return outcome ?? fail(notFound(input.agentId));
}

/** The heartbeat itself, under the agent's lock. Undefined when the agent's file is gone. */
async function beat(
  ctx: TeamsContext,
  input: HeartbeatInput,
  sessionId: string,
): Promise<OpResult<HeartbeatOutput> | undefined> {
  const { store } = ctx;
  const { agent: read, slot } = await store.readLiveness(input.teamName, input.agentId);
  if (read.kind === "corrupt") return fail(notFound(input.agentId), [read.warning]);
  if (read.kind !== "ok") return undefined;
  const agent = read.value;
  const refused = refusal(agent, input.agentId, sessionId);
  if (refused) return fail(refused);

  const now = ctx.clock.now();
  const nowIso = new Date(now).toISOString();
  const status = statusAfterHeartbeat(agent.status, input.status);
  store.writeHeartbeat(
    input.teamName,
    input.agentId,
    nextHeartbeat(slot.record, nowIso, "tool", { event: true, metadata: input.metadata }),
  );
  if (status !== agent.status || agent.consecutiveMisses > 0) {
    const next: AgentState = {
      ...agent,
      status,
      heartbeatTs: nowIso,
      heartbeatSource: "tool",
      consecutiveMisses: 0,
      lastMissAt: undefined,
      updatedAt: nowIso,
    };
    // Liveness only (status, misses reset): see TeamStore.writeAgent.
    await store.writeAgent(next, { durable: false, blocking: true });
  }
  return {
    success: true as const,
    heartbeatTs: nowIso,
    nextDeadline: new Date(now + ctx.options.staleThresholdMs).toISOString(),
    agentStatus: status,
  };
}

/** Why a heartbeat for `agent` from `sessionId` is refused, said with what the caller is to do now. */
function refusal(agent: AgentState, agentId: string, sessionId: string): string | undefined {
  if (agent.sessionId !== sessionId) {
    return `Agent '${agentId}' does not belong to this session: heartbeat only with your own agentId, from your identity at the top of your system prompt`;
  }
  if (agent.status === "terminated") {
    return `Cannot heartbeat for terminated agent: your run has ended (${agent.outcome ?? "terminated"}). Stop working and end your turn.`;
  }
  if (agent.status === "inactive") {
    return `Agent is inactive: you were declared inactive (${agent.statusReason ?? "no sign of life"}) and your tasks went back to the team. Stop working and end your turn with a note of where you got to; the team leader can resume you.`;
  }
  return undefined;
}

/** Said to an agent that quotes an id it does not own: most often an old id after a resume. */
function notFound(agentId: string): string {
  return `Agent '${agentId}' not found: use the agentId from your identity at the top of your system prompt (a resumed agent gets a new id)`;
}

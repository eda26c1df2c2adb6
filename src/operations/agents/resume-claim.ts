import type { ProcessApi } from "../../edges/host-process-api.ts";
import type { AgentState } from "../../state/schemas.ts";

/**
 * How long a claim on an agent (resumedBy) holds when its claimant cannot be checked (another host, or a claim from
 * before claimants were recorded): longer than a resume takes from its claim to the successor's record (closing the
 * old pane, a session and a member), so only a resume that died in between loses it.
 */
export const RESUME_CLAIM_TTL_MS = 120_000;
/** A claim dated further ahead than this was made before the clock went back. */
const FUTURE_SKEW_MS = 2_000;

/** What a resume-agent call writes next to `resumedBy`: when, and which process claims it. */
export function claimBy(
  processes: ProcessApi,
  now: string,
): Pick<AgentState, "resumeClaimedAt" | "resumeClaimPid" | "resumeClaimHost"> {
  return { resumeClaimedAt: now, resumeClaimPid: processes.self.pid, resumeClaimHost: processes.self.host };
}

/**
 * Whether the resume that claimed `agent` (resumedBy) may still be launching its successor. A claimant of this host
 * decides by being alive, whatever the clock says (a clock step must neither free a claim in use nor keep a dead one);
 * otherwise the claim's age does: stale past RESUME_CLAIM_TTL_MS, or dated in the future beyond a small skew.
 */
export function claimHolds(processes: ProcessApi, agent: AgentState, now: number): boolean {
  if (!agent.resumedBy) return false;
  const pid = agent.resumeClaimPid;
  if (pid !== undefined && agent.resumeClaimHost === processes.self.host) return processes.running(pid);
  const age = now - Date.parse(agent.resumeClaimedAt ?? agent.updatedAt);
  return age < RESUME_CLAIM_TTL_MS && age >= -FUTURE_SKEW_MS;
}

/** `agent` with no claim on it (a resume that launched nothing gives it back). */
export function withoutClaim(agent: AgentState): AgentState {
  const {
    resumedBy: _by,
    resumeClaimedAt: _at,
    resumeClaimPid: _pid,
    resumeClaimHost: _host,
    ...rest
  } = agent;
  return rest;
}

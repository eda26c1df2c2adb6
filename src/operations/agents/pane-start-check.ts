import { isoNow } from "../../clock.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { handOverInactive, type InactiveAgent, markedInactive } from "../liveness/inactive.ts";
import { notifyLeader } from "../messages/notify.ts";
import { errorText } from "../result.ts";
import { type AgentPane, confirmPaneStarted } from "./agent-pane.ts";
import { abortEndedSession } from "./session-abort.ts";

/** The new agent whose pane is checked: where its record lives and what the launch recorded. */
export interface StartedPane {
  teamName: string;
  agentId: string;
  name: string;
  sessionId: string;
  pane: AgentPane;
}

/** The checks under way, per context, so that a test (or a shutdown) can wait for them. */
const running = new WeakMap<TeamsContext, Set<Promise<void>>>();

/**
 * Check, after spawn-agent or resume-agent has returned, that the new pane's command started: a pane whose command
 * exits at once (a missing or broken opencode binary) ends the agent as a dead pane does, and the leader's notice says
 * why. Started, never awaited, never throws (problems are logged). The check waits up to `settleMs` after the pane
 * opened, which the caller no longer waits for.
 */
export function checkPaneStartLater(ctx: TeamsContext, started: StartedPane): void {
  let checks = running.get(ctx);
  if (!checks) {
    checks = new Set();
    running.set(ctx, checks);
  }
  const mine = checks;
  const check = checkPaneStart(ctx, started)
    .catch((error: unknown) => {
      ctx.log("warn", `the start of ${started.name}'s pane could not be checked: ${errorText(error)}`);
    })
    .finally(() => {
      mine.delete(check);
    });
  mine.add(check);
}

/** Resolves once no pane check of this context runs (one started meanwhile is waited for too). Never rejects. */
export async function paneChecksSettled(ctx: TeamsContext): Promise<void> {
  for (;;) {
    const checks = [...(running.get(ctx) ?? [])];
    if (checks.length === 0) return;
    await Promise.all(checks);
  }
}

async function checkPaneStart(ctx: TeamsContext, started: StartedPane): Promise<void> {
  let failure: string;
  try {
    await confirmPaneStarted(ctx, started.pane, started.sessionId);
    return;
  } catch (error) {
    failure = errorText(error);
  }
  const reason = `its tmux pane ${started.pane.paneId} closed as it opened: ${failure}`;
  const found = await endAgentOfDeadPane(ctx, started, reason);
  if (found.kind === "ended") {
    const team = await ctx.store.readTeam(started.teamName);
    if (team.kind === "ok") await handOverInactive(ctx, team.value, [found.death]);
    const warnings = await abortEndedSession(ctx, found.death.agent, { wasRunning: true });
    for (const warning of warnings) ctx.log("info", `pane check: ${warning}`, { team: started.teamName });
  } else if (found.kind === "already-inactive") {
    // The pane watch saw the pane gone first and told the leader that much: this says why it went.
    const team = await ctx.store.readTeam(started.teamName);
    if (team.kind !== "ok") return;
    await notifyLeader(ctx, team.value, {
      type: "notice",
      text: `Agent ${started.name} (${started.agentId}): ${reason}.`,
      data: { agentId: started.agentId, name: started.name, cause: "pane_gone", reason },
    });
  }
}

type DeadPaneOutcome =
  | { kind: "ended"; death: Omit<InactiveAgent, "tasks"> }
  | { kind: "already-inactive" }
  /** Ended on purpose meanwhile (complete-agent, kill-agent, a rollback), or its pane is not this one any more. */
  | { kind: "nothing" };

/** Under the agent's lock: a live agent on this pane becomes inactive; anything else is left as it is. */
async function endAgentOfDeadPane(
  ctx: TeamsContext,
  { teamName, agentId, pane }: StartedPane,
  reason: string,
): Promise<DeadPaneOutcome> {
  const outcome = await ctx.store.withAgentLock(teamName, agentId, async (): Promise<DeadPaneOutcome> => {
    // Blocking, like every write under an agent's lock while event streams write it (see specs/storage.md).
    const read = await ctx.store.readAgent(teamName, agentId, { blocking: true });
    if (read.kind !== "ok" || read.value.paneId !== pane.paneId) return { kind: "nothing" };
    if (read.value.status === "inactive") return { kind: "already-inactive" };
    if (!isLive(read.value.status)) return { kind: "nothing" };
    const next = markedInactive(read.value, reason, isoNow(ctx.clock));
    await ctx.store.writeAgent(next, { durable: false, blocking: true });
    return { kind: "ended", death: { agent: next, cause: "pane_gone", reason } };
  });
  if (outcome.kind === "ended") await ctx.store.flushAgent(teamName, agentId);
  return outcome;
}

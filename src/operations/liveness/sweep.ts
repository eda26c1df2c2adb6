import { type LivePanes, ownsLivePane, type PaneRef } from "../../edges/tmux-api.ts";
import { mapLimit } from "../../map-limit.ts";
import type { AgentView } from "../../state/agent-view.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { agentPaneRef } from "../agents/agent-pane.ts";
import { finishOverdueKill, killOverdue } from "../agents/kill.ts";
import { abortEndedSession } from "../agents/session-abort.ts";
import type { TeamsContext } from "../context.ts";
import { deliverPending, notifyLeader } from "../messages/notify.ts";
import { handOverInactive, type InactiveAgent } from "./inactive.ts";
import { type ServerFacts, ServerFactsReader } from "./server-facts.ts";
import { decide, isSweptMember, judgeStale, type SweepOutcome, type Verdict } from "./sweep-decision.ts";
import { reminderNotice, tellLeaderWaiting } from "./waiting.ts";

/** What one sweep did; returned for tests and logged when anything happened. */
export interface SweepReport {
  teams: number;
  /** Agents the sweep is responsible for (live workers and reviewers). */
  checked: number;
  /** Agent files read (agents known to be fresh are not read again until they could be stale). */
  read: number;
  /** Agents whose heartbeat was older than the threshold. */
  stale: number;
  /** Misses counted (not counting the ones that made an agent inactive). */
  misses: number;
  /** Busy sessions whose heartbeat the sweep refreshed. */
  refreshed: number;
  /** Agents whose miss count went back to 0 after a fresh heartbeat. */
  reset: number;
  /** Stale agents spared because they wait on a permission or a question. */
  waiting: number;
  /** Leaders reminded of a request left open longer than `waitingRemindMs`. */
  reminded: number;
  inactive: InactiveAgent[];
  /** Leader notices delivered by the retry pass. */
  delivered: number;
  /** Graceful kills past their deadline whose caller was gone, finished by this sweep. */
  killsFinished: number;
  /** undefined: nothing needed asking the server this time. */
  serverReachable: boolean | undefined;
  durationMs: number;
}

const CHECK_CONCURRENCY = 16;

/** Count the outcomes into the report; the deaths and the reminders are acted on after the batch is written. */
function tallyOutcomes(
  outcomes: readonly SweepOutcome[],
  report: SweepReport,
): { deaths: Omit<InactiveAgent, "tasks">[]; reminders: AgentState[] } {
  const deaths: Omit<InactiveAgent, "tasks">[] = [];
  const reminders: AgentState[] = [];
  for (const outcome of outcomes) {
    switch (outcome.kind) {
      case "inactive":
        deaths.push(outcome.death);
        break;
      case "miss":
        report.misses++;
        break;
      case "refreshed":
        report.refreshed++;
        break;
      case "reset":
        report.reset++;
        break;
      case "waiting":
        report.waiting++;
        break;
      case "remind":
        report.waiting++;
        reminders.push(outcome.agent);
        break;
      default:
        break;
    }
  }
  return { deaths, reminders };
}

/**
 * The stale sweep (specs/heartbeat.md). Any number of processes may run it: every decision is re-checked under the agent's
 * lock, and a miss is counted at most once per sweep interval whichever process counts it (`lastMissAt`).
 */
export class StaleSweeper {
  /** Leader notices known to be delivered (file paths), so the retry pass skips them cheaply. */
  private readonly settledNotices = new Set<string>();
  /**
   * `team/agentId` -> until when this agent need not be read again: the moment its last seen heartbeat goes stale
   * (Infinity for agents the sweep never acts on). Keeps a sweep of many healthy agents to a directory listing.
   */
  private readonly skipUntil = new Map<string, number>();
  /**
   * `team/agentId` -> the pane of a running agent the sweep has read. Every sweep checks these, fresh agents too: a
   * closed pane means the user stopped the agent, though its session on the server may still be heartbeating. A pane
   * id that now names a pane that is not the agent's (a restarted tmux server) counts as closed.
   */
  private readonly panes = new Map<string, PaneRef>();
  /** `team/agentId` of every agent a sweep has read: one the sweep never read may have a pane it does not know. */
  private readonly seen = new Set<string>();
  /** Running agents read before their pane was recorded (spawn records it after the prompt). */
  private readonly awaitingPane = new Set<string>();

  constructor(private readonly ctx: TeamsContext) {}

  /**
   * The pane watch between sweeps (see specs/heartbeat.md): true when a known pane is gone or no longer the agent's,
   * or an agent's pane is not known yet. Costs one `tmux list-panes -a` per tmux server and a directory listing per
   * team; it runs nothing built from agents' text.
   */
  async needsSweep(): Promise<boolean> {
    if (this.awaitingPane.size > 0) return true;
    for (const teamName of await this.ctx.store.listTeamNames()) {
      for (const agentId of await this.ctx.store.listAgentIds(teamName))
        if (!this.seen.has(`${teamName}/${agentId}`)) return true;
    }
    const lists = new Map<string, Promise<LivePanes | undefined>>();
    for (const pane of this.panes.values()) {
      const socket = pane.socket ?? "";
      let list = lists.get(socket);
      if (!list) {
        list = this.ctx.edges.tmux.livePanes(pane.socket).catch(() => undefined);
        lists.set(socket, list);
      }
      const live = await list;
      if (live && !ownsLivePane(live, pane)) return true;
    }
    return false;
  }

  async sweep(): Promise<SweepReport> {
    const { ctx } = this;
    const started = performance.now();
    const report: SweepReport = {
      teams: 0,
      checked: 0,
      read: 0,
      stale: 0,
      misses: 0,
      refreshed: 0,
      reset: 0,
      waiting: 0,
      reminded: 0,
      inactive: [],
      delivered: 0,
      killsFinished: 0,
      serverReachable: undefined,
      durationMs: 0,
    };
    const facts = new ServerFactsReader(ctx);
    // One `tmux list-panes -a` per tmux server per sweep, however many agents and teams share it.
    const paneLists = new Map<string, Promise<LivePanes | undefined>>();
    const livePanes = (socket: string | undefined) => {
      const key = socket ?? "";
      let list = paneLists.get(key);
      if (!list) {
        list = ctx.edges.tmux.livePanes(socket).catch(() => undefined);
        paneLists.set(key, list);
      }
      return list;
    };
    for (const teamName of await ctx.store.listTeamNames()) {
      try {
        await this.sweepTeam(teamName, report, (directories) => facts.read(directories), livePanes);
      } catch (error) {
        ctx.log("error", `sweep of team ${teamName} failed`, {
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        });
      }
    }
    report.serverReachable = await facts.reachable();
    report.durationMs = performance.now() - started;
    const acted = report.misses + report.inactive.length + report.refreshed + report.killsFinished;
    if (acted + report.delivered > 0) {
      ctx.log("debug", "stale sweep", {
        checked: report.checked,
        stale: report.stale,
        misses: report.misses,
        refreshed: report.refreshed,
        inactive: report.inactive.length,
        delivered: report.delivered,
        killsFinished: report.killsFinished,
        durationMs: Math.round(report.durationMs),
      });
    }
    return report;
  }

  private async sweepTeam(
    teamName: string,
    report: SweepReport,
    serverFacts: (directories: ReadonlySet<string>) => Promise<ServerFacts>,
    livePanes: (socket: string | undefined) => Promise<LivePanes | undefined>,
  ): Promise<void> {
    const { ctx } = this;
    const team = await this.readSweptTeam(teamName);
    if (!team) return;
    report.teams++;
    const now = ctx.clock.now();
    const ids = await ctx.store.listAgentIds(teamName);
    // Every listed agent is looked at by this sweep (read, or skipped as known), damaged files included.
    for (const agentId of ids) this.seen.add(`${teamName}/${agentId}`);
    const paneGone = await this.panesGone(teamName, ids, livePanes);
    for (const agentId of paneGone) this.skipUntil.delete(`${teamName}/${agentId}`);
    const { stale, toReset, overdueKills } = await this.sortAgents(
      team,
      this.dueAgents(teamName, ids, now, report),
      {
        paneGone,
        now,
        report,
      },
    );
    report.stale += stale.length;

    let facts: ServerFacts = { server: undefined, statuses: {}, unanswered: new Map() };
    if (stale.length > 0) facts = await serverFacts(new Set(stale.map((view) => view.state.cwd)));
    const verdicts = await mapLimit(stale, CHECK_CONCURRENCY, (view) => judgeStale(ctx, view, facts, now));
    const work = new Map<string, Verdict | undefined>([
      ...stale.map((view, index): [string, Verdict | undefined] => [view.state.agentId, verdicts[index]]),
      ...toReset.map((view): [string, undefined] => [view.state.agentId, undefined]),
    ]);
    const outcomes = await ctx.store.updateAgents(team.name, [...work.keys()], (agentId, current) =>
      decide(ctx, { team, agentId, agent: current, verdict: work.get(agentId), now, facts }),
    );
    const { deaths, reminders } = tallyOutcomes(outcomes, report);
    await this.handOverDeaths(team, deaths, facts, report);
    for (const agent of reminders) {
      if (!agent.waitingFor) continue;
      await tellLeaderWaiting(ctx, team.name, agent, reminderNotice(agent, agent.waitingFor, now));
      report.reminded++;
    }
    if (overdueKills.length > 0) report.killsFinished += await this.finishOverdueKills(team, overdueKills);
    report.delivered += await deliverPending(ctx, team, this.settledNotices);
  }

  /** The team, or undefined (its agents marked seen) while it cannot be read. */
  private async readSweptTeam(teamName: string): Promise<TeamConfig | undefined> {
    const read = await this.ctx.store.readTeam(teamName);
    if (read.kind === "ok") return read.value;
    // Nothing to do for its agents until the team can be read; the pane watch need not ask again every tick.
    for (const agentId of await this.ctx.store.listAgentIds(teamName))
      this.seen.add(`${teamName}/${agentId}`);
    return undefined;
  }

  /** Agents that must be read this sweep: the ones not known to be fresh (or final) until now. */
  private dueAgents(teamName: string, ids: readonly string[], now: number, report: SweepReport): string[] {
    const due: string[] = [];
    for (const agentId of ids) {
      const until = this.skipUntil.get(`${teamName}/${agentId}`);
      if (until === undefined || now > until) due.push(agentId);
      else if (until !== Number.POSITIVE_INFINITY) report.checked++;
    }
    report.read += due.length;
    return due;
  }

  /**
   * Read the due agents and sort them: stale ones (to be judged), fresh ones with misses to reset, and graceful kills
   * past their deadline. Records their panes and until when each need not be read again.
   */
  private async sortAgents(
    team: TeamConfig,
    due: readonly string[],
    { paneGone, now, report }: { paneGone: ReadonlySet<string>; now: number; report: SweepReport },
  ): Promise<{ stale: AgentView[]; toReset: AgentView[]; overdueKills: AgentState[] }> {
    const { ctx } = this;
    const threshold = ctx.options.staleThresholdMs;
    const reads = await ctx.store.readAgentViews(team.name, due);
    const sorted = { stale: [] as AgentView[], toReset: [] as AgentView[], overdueKills: [] as AgentState[] };
    for (const [index, result] of reads.entries()) {
      if (result.kind === "corrupt") {
        ctx.log("warn", `stale sweep skipped agent ${due[index]} of team ${team.name}`, {
          warning: result.warning,
        });
      }
      if (result.kind !== "ok") continue;
      const view = result.value;
      const key = `${team.name}/${view.state.agentId}`;
      this.awaitingPane.delete(key);
      if (!isSweptMember(team, view.state)) {
        this.panes.delete(key);
        // Final states and the leader never need another look; shutting_down may still go either way.
        if (view.state.status !== "shutting_down") this.skipUntil.set(key, Number.POSITIVE_INFINITY);
        else if (killOverdue(view.state, now, ctx.options)) sorted.overdueKills.push(view.state);
        continue;
      }
      report.checked++;
      const paneRef = agentPaneRef(view.state);
      if (paneRef) this.panes.set(key, paneRef);
      // Only while the spawn may still be opening it: an agent that never got a pane is left to the sweep.
      else if (!view.state.headless && now - Date.parse(view.state.createdAt) < threshold)
        this.awaitingPane.add(key);
      const freshUntil = Date.parse(view.heartbeatTs) + threshold;
      // A gone pane goes to the verdict, which confirms it and declares the agent dead whatever its heartbeat says.
      if (now > freshUntil || paneGone.has(view.state.agentId)) sorted.stale.push(view);
      else if (view.state.consecutiveMisses > 0) sorted.toReset.push(view);
      // Heartbeats only ever make an agent fresher: until then it cannot be stale, so it need not be read. Except an
      // agent whose pane is still being opened (spawn records it after the prompt): read it until its pane is known.
      else if (view.state.headless || view.state.paneId) this.skipUntil.set(key, freshUntil);
    }
    return sorted;
  }

  /** Hand the dead agents' tasks back and tell the leader; abort the sessions the server still runs. */
  private async handOverDeaths(
    team: TeamConfig,
    deaths: readonly Omit<InactiveAgent, "tasks">[],
    facts: ServerFacts,
    report: SweepReport,
  ): Promise<void> {
    if (deaths.length === 0) return;
    const { ctx } = this;
    report.inactive.push(...(await handOverInactive(ctx, team, deaths)));
    // A session the server still runs would keep working on tasks that were just handed to someone else. Aborted
    // under the agent's lock, like every abort of an ended record: a resume may have handed the session on already.
    const abortable = deaths.filter(({ agent }) => facts.statuses[agent.sessionId] !== undefined);
    await mapLimit(abortable, CHECK_CONCURRENCY, async ({ agent }) => {
      const skipped = await abortEndedSession(ctx, agent, { wasRunning: true }).catch((error: unknown) => [
        error instanceof Error ? error.message : String(error),
      ]);
      for (const warning of skipped) ctx.log("info", `stale sweep: ${warning}`, { team: team.name });
    });
  }

  /**
   * Graceful kills whose caller is gone (its tool call was cut off, OpenCode restarted): finished as their caller
   * would have. Only the finisher whose write ended a run tells the leader, so two sweepers report it once.
   */
  private async finishOverdueKills(team: TeamConfig, agents: readonly AgentState[]): Promise<number> {
    const lines: string[] = [];
    for (const agent of agents) {
      const finished = await finishOverdueKill(this.ctx, agent);
      if (!finished.ended) continue;
      const tasks = finished.reassignedTasks.length > 0 ? finished.reassignedTasks.join(", ") : "none";
      lines.push(
        `The kill of agent ${agent.name} (${agent.agentId}) was left unfinished; it is terminated now. Tasks returned to pending: ${tasks}.`,
      );
    }
    if (lines.length > 0) {
      await notifyLeader(this.ctx, team, { type: "notice", text: lines.join("\n") }).catch(
        (error: unknown) => {
          this.ctx.log("error", "could not tell the leader of finished kills", {
            team: team.name,
            error: error instanceof Error ? error.message : String(error),
          });
        },
      );
    }
    return lines.length;
  }

  /** Agents of the team whose known pane is no longer on its tmux server, or no longer theirs. */
  private async panesGone(
    teamName: string,
    ids: readonly string[],
    livePanes: (socket: string | undefined) => Promise<LivePanes | undefined>,
  ): Promise<Set<string>> {
    const gone = new Set<string>();
    for (const agentId of ids) {
      const pane = this.panes.get(`${teamName}/${agentId}`);
      if (!pane) continue;
      const live = await livePanes(pane.socket);
      if (live && !ownsLivePane(live, pane)) gone.add(agentId);
    }
    return gone;
  }
}

import { CallerError } from "../operations/result.ts";
import { setTeamLimits } from "../operations/usage/limits.ts";
import { resolveAgent, teamOrFail } from "./agent-ref.ts";
import { type CommandSpec, UsageError } from "./command.ts";
import { collectHistory, renderHistory } from "./history.ts";
import { collectInbox, renderInbox } from "./messages.ts";
import { collectStatus, renderStatus, watchHeader } from "./status.ts";
import { collectTasks, renderTasks } from "./tasks.ts";
import { collectUsage, limitsFromOptions, renderUsage } from "./usage.ts";
import { collectDiff, collectWorktrees, renderDiff, renderWorktrees } from "./worktrees.ts";

/** `watch --interval`: seconds between frames; below half a second the table only flickers. */
function intervalSeconds(raw: string | undefined): number {
  if (raw === undefined) return 2;
  const seconds = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !Number.isFinite(seconds) || seconds < 0.5 || seconds > 3600) {
    throw new UsageError(`--interval must be a number of seconds from 0.5 to 3600, not '${raw}'`);
  }
  return seconds;
}

export const LOOK_COMMANDS: CommandSpec[] = [
  {
    name: "status",
    args: "[team] [--all]",
    summary:
      "Every agent: name, short id, role, status, health, heartbeat age, model, pane, task, what it waits on.",
    details: [
      "Read from the state files only (works with the server down). Ended agents are left out unless --all;",
      "an agent's pane shows only while it runs. A leader is healthy while it is simply idle.",
    ],
    options: { all: { type: "boolean", help: "include ended (terminated) agents" } },
    examples: ["opencode-teams status", "opencode-teams status my-team --all --json"],
    json: true,
    arity: [0, 1],
    async run({ ctx, args, values, paint, show }) {
      const [team] = args;
      if (team) await teamOrFail(ctx, team);
      const report = await collectStatus(ctx, team, values.all === true);
      show(report, () => renderStatus(report, paint));
      return 0;
    },
  },
  {
    name: "watch",
    args: "[team] [--interval <seconds>] [--all]",
    summary: "The status table, redrawn every few seconds until Ctrl-C.",
    details: ["On a terminal the screen is redrawn in place; piped, each frame is printed after the last."],
    options: {
      interval: {
        type: "string",
        valueName: "seconds",
        help: "seconds between frames, 0.5 to 3600 (default 2)",
      },
      all: { type: "boolean", help: "include ended (terminated) agents" },
    },
    examples: ["opencode-teams watch", "opencode-teams watch my-team --interval 5"],
    json: false,
    arity: [0, 1],
    async run({ ctx, args, values, paint, print }) {
      const seconds = intervalSeconds(typeof values.interval === "string" ? values.interval : undefined);
      const [team] = args;
      if (team) await teamOrFail(ctx, team);
      const clear = Boolean(process.stdout.isTTY);
      for (;;) {
        const report = await collectStatus(ctx, team, values.all === true);
        print(`${clear ? "\u001b[2J\u001b[H" : ""}${paint(watchHeader(report), "bold")}\n`);
        print(renderStatus(report, paint));
        if (!clear) print("");
        await Bun.sleep(seconds * 1000);
      }
    },
  },
  {
    name: "tasks",
    args: "[team]",
    summary: "The task board as a tree of dependencies: status, owner and age of every task.",
    details: [
      "A task waiting for others is drawn under them; ready tasks can be taken with the claim-task tool.",
    ],
    examples: ["opencode-teams tasks", "opencode-teams tasks my-team --json"],
    json: true,
    arity: [0, 1],
    async run({ ctx, args, paint, show }) {
      const [team] = args;
      if (team) await teamOrFail(ctx, team);
      const report = await collectTasks(ctx, team);
      show(report, () => renderTasks(report, paint));
      return 0;
    },
  },
  {
    name: "usage",
    args: "[team] [--budget-usd <n>] [--budget-tokens <n>] [--max-agents <n>]",
    summary:
      "Tokens and cost per agent, per model and per team (the leader apart), with budgets and the cap.",
    details: [
      "Read from the state files only: the plugin counts usage from the OpenCode event stream.",
      "--budget-usd, --budget-tokens and --max-agents (with a team) change the team's limits: yours to decide,",
      "no tool lets a model raise them. Agents a budget stopped stay stopped until resumed.",
    ],
    options: {
      "budget-usd": { type: "string", valueName: "n", help: "the team's budget in US dollars" },
      "budget-tokens": { type: "string", valueName: "n", help: "the team's budget in tokens" },
      "max-agents": { type: "string", valueName: "n", help: "how many agents the team may run at once" },
    },
    examples: [
      "opencode-teams usage",
      "opencode-teams usage my-team --json",
      "opencode-teams usage my-team --budget-usd 5 --max-agents 4",
    ],
    json: true,
    arity: [0, 1],
    async run({ ctx, args, values, paint, show }) {
      const [team] = args;
      if (team) await teamOrFail(ctx, team);
      const limits = limitsFromOptions(values);
      if (limits) {
        if (!team) throw new UsageError("name the team whose limits you change");
        await setTeamLimits(ctx, team, limits).catch((error: unknown) => {
          throw error instanceof CallerError ? new UsageError(error.message) : error;
        });
      }
      const report = await collectUsage(ctx, team);
      show(report, () => renderUsage(report, paint));
      return 0;
    },
  },
  {
    name: "history",
    args: "<team>",
    summary:
      "The team's agent runs, newest first: spawned, completed, interrupted, resumed, failed, timeout.",
    examples: ["opencode-teams history my-team", "opencode-teams history my-team --json"],
    json: true,
    arity: [1, 1],
    async run({ ctx, args, paint, show }) {
      const team = await teamOrFail(ctx, args[0] ?? "");
      const view = await collectHistory(ctx, team.name);
      show(view, () => renderHistory(view, paint));
      return 0;
    },
  },
  {
    name: "inbox",
    args: "<team> [agent]",
    summary: "An inbox, newest first: the leader's, or an agent's (by name or id). Nothing is marked read.",
    examples: ["opencode-teams inbox my-team", "opencode-teams inbox my-team worker-1 --json"],
    json: true,
    arity: [1, 2],
    async run({ ctx, args, paint, show }) {
      const team = await teamOrFail(ctx, args[0] ?? "");
      const agent =
        args[1] === undefined || args[1] === "leader" ? undefined : await resolveAgent(ctx, team, args[1]);
      const view = await collectInbox(ctx, team, agent?.agentId ?? team.leader);
      show(view, () => renderInbox(view, paint));
      return 0;
    },
  },
  {
    name: "worktrees",
    args: "[team]",
    summary: "The agents' git worktrees: branch, commits ahead of the base, uncommitted files, path.",
    examples: ["opencode-teams worktrees", "opencode-teams worktrees my-team --json"],
    json: true,
    arity: [0, 1],
    async run({ ctx, args, paint, show }) {
      const [team] = args;
      if (team) await teamOrFail(ctx, team);
      const rows = await collectWorktrees(ctx, team);
      show(rows, () => renderWorktrees(rows, paint));
      return 0;
    },
  },
  {
    name: "diff",
    args: "<team> <agent>",
    summary: "An agent's branch (by name or id): its commits, the diffstat, and what it has not committed.",
    examples: ["opencode-teams diff my-team worker-1", "opencode-teams diff my-team 3f2a9c1e --json"],
    json: true,
    arity: [2, 2],
    async run({ ctx, args, paint, show }) {
      const team = await teamOrFail(ctx, args[0] ?? "");
      const agent = await resolveAgent(ctx, team, args[1] ?? "");
      const view = await collectDiff(ctx, team.name, agent.agentId);
      show(view, () => renderDiff(view, paint));
      return 0;
    },
  },
];

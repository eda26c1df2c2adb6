#!/usr/bin/env bun
// The human view of opencode-teams: status tables, a live watch, history and a health check of the set-up.
import { parseArgs } from "node:util";
import { UnavailableOpencodeApi } from "../edges/unavailable.ts";
import type { TeamsContext } from "../operations/context.ts";
import { parseOptions } from "../options.ts";
import { buildContext } from "../plugin.ts";
import { ANSWER_USAGE, runAnswer } from "./answer.ts";
import { renderDoctor, runDoctor } from "./doctor.ts";
import { type Painter, painter } from "./format.ts";
import { collectHistory, renderHistory } from "./history.ts";
import { nextSteps, renderInit, runInit } from "./init.ts";
import { cliSend, collectInbox, renderInbox } from "./messages.ts";
import { findProjectRoot } from "./project.ts";
import { runServerCommand } from "./server.ts";
import { collectStatus, renderStatus } from "./status.ts";
import { collectDiff, collectWorktrees, renderDiff, renderWorktrees } from "./worktrees.ts";

const USAGE = `opencode-teams: see and check your agent teams

usage:
  opencode-teams status [team] [--all] [--json]    agents: status, health, heartbeat age, model, pane, task
  opencode-teams watch [team] [--interval 2]       the status table, refreshed until Ctrl-C
  opencode-teams history <team> [--json]           agent runs: spawned, completed, interrupted, resumed...
  opencode-teams doctor [--json]                   check tmux, opencode, the plugin, the server and the storage dir
  opencode-teams init [--global] [--undo]          add the plugin to opencode.json (or ~/.config/opencode), then doctor
  opencode-teams server status|stop [--json]       the project's OpenCode server: is it ours and healthy; stop it
  opencode-teams send <team> <to> <message...>     message an agent (name or id), "leader" or "all", as "human"
  opencode-teams inbox <team> [agent] [--json]     an inbox (the leader's by default), newest first
  opencode-teams worktrees [team] [--json]         agents' git worktrees: branch, commits ahead, dirty files, path
  opencode-teams diff <team> <agent> [--json]      an agent's branch: commits, diffstat, uncommitted files
${ANSWER_USAGE}

options:
  --dir <path>   project directory (default: the git worktree around the current directory)
  --all          include terminated agents
  --json         machine-readable output
  --no-color     plain output even on a terminal`;

function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dir: { type: "string" },
      all: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      "no-color": { type: "boolean", default: false },
      interval: { type: "string", default: "2" },
      help: { type: "boolean", short: "h", default: false },
      global: { type: "boolean", default: false },
      undo: { type: "boolean", default: false },
      always: { type: "boolean", default: false },
      message: { type: "string" },
    },
  });
}

/** What every command gets: the parsed command line, the project, its context and a way to print. */
interface Invocation {
  values: ReturnType<typeof parseCommandLine>["values"];
  positionals: string[];
  team: string | undefined;
  projectRoot: string;
  ctx: TeamsContext;
  paint: Painter;
  print(text: string): void;
  /** `data` as JSON with --json, else `text()`. */
  show(data: unknown, text: () => string): void;
}

function usage(line: string): number {
  process.stderr.write(`usage: opencode-teams ${line}\n`);
  return 2;
}

const COMMANDS: Record<string, (run: Invocation) => Promise<number>> = {
  async status({ ctx, team, values, paint, show }) {
    const report = await collectStatus(ctx, team, values.all);
    show(report, () => renderStatus(report, paint));
    return 0;
  },
  async watch({ ctx, team, values, paint, print }) {
    const seconds = Math.max(0.5, Number(values.interval) || 2);
    for (;;) {
      const report = await collectStatus(ctx, team, values.all);
      process.stdout.write(
        `\u001b[2J\u001b[H${paint(`opencode-teams watch  ${report.generatedAt}  (Ctrl-C to stop)`, "bold")}\n\n`,
      );
      print(renderStatus(report, paint));
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    }
  },
  async history({ ctx, team, paint, show }) {
    if (!team) return usage("history <team>");
    const view = await collectHistory(ctx, team);
    show(view, () => renderHistory(view, paint));
    return 0;
  },
  async init({ ctx, projectRoot, values, paint, print }) {
    const init = await runInit({
      projectRoot,
      scope: values.global ? "global" : "project",
      undo: values.undo,
    });
    print(renderInit(init));
    if (values.undo) return 0;
    const report = await runDoctor(ctx);
    print(`${renderDoctor(report, paint)}\n\n${nextSteps(projectRoot, init)}`);
    return report.ok ? 0 : 1;
  },
  async doctor({ ctx, paint, show }) {
    const report = await runDoctor(ctx);
    show(report, () => renderDoctor(report, paint));
    return report.ok ? 0 : 1;
  },
  async worktrees({ ctx, team, paint, show }) {
    const rows = await collectWorktrees(ctx, team);
    show(rows, () => renderWorktrees(rows, paint));
    return 0;
  },
  async diff({ ctx, team, positionals, paint, show }) {
    const agent = positionals[2];
    if (!team || !agent) return usage("diff <team> <agent name or id>");
    const view = await collectDiff(ctx, team, agent);
    show(view, () => renderDiff(view, paint));
    return 0;
  },
  approve: ({ ctx, positionals, values, print }) =>
    runAnswer(ctx, "approve", positionals.slice(1), values, print),
  deny: ({ ctx, positionals, values, print }) => runAnswer(ctx, "deny", positionals.slice(1), values, print),
  async server({ ctx, team, show }) {
    const result = await runServerCommand(ctx, team);
    show(result.output, () => result.text);
    return result.code;
  },
  async send({ ctx, team, positionals, values, print }) {
    const [, , to, ...words] = positionals;
    if (!team || !to || words.length === 0) return usage("send <team> <to> <message...>");
    const sent = await cliSend(ctx, team, to, words);
    print(JSON.stringify(sent, null, values.json ? 2 : undefined));
    return sent.success ? 0 : 1;
  },
  async inbox({ ctx, team, positionals, paint, show }) {
    if (!team) return usage("inbox <team> [agent]");
    const view = await collectInbox(ctx, team, positionals[2]);
    show(view, () => renderInbox(view, paint));
    return 0;
  },
};

async function main(argv: string[]): Promise<number> {
  // The bin launcher may run us on OpenCode's binary acting as Bun; the opencode we start ourselves must be OpenCode.
  delete process.env.BUN_BE_BUN;
  const { values, positionals } = parseCommandLine(argv);
  const [command, team] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }
  const projectRoot = findProjectRoot(values.dir ?? process.cwd());
  const ctx = buildContext({
    projectRoot,
    options: parseOptions({ background: false }),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the CLI has no OpenCode server of its own"),
  });
  const paint = painter(
    Boolean(process.stdout.isTTY) && !values["no-color"] && !values.json && !process.env.NO_COLOR,
  );
  const print = (text: string) => process.stdout.write(`${text}\n`);
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run) {
    process.stderr.write(`unknown command '${command}'\n\n${USAGE}\n`);
    return 2;
  }
  const show = (data: unknown, text: () => string) =>
    print(values.json ? JSON.stringify(data, null, 2) : text());
  return run({ values, positionals, team, projectRoot, ctx, paint, print, show });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`opencode-teams: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);

import { createInterface } from "node:readline/promises";
import { cliKill, cliMerge, cliResume } from "./act.ts";
import { resolveAgent, shortId, teamOrFail } from "./agent-ref.ts";
import { type Confirm, runAnswer } from "./answer.ts";
import { attachTarget, runAttach } from "./attach.ts";
import { cliWords } from "./cli-words.ts";
import { CliFailure, type CommandSpec, stringOption, UsageError } from "./command.ts";
import { cliSend, sentSentence } from "./messages.ts";
import { terminalLine } from "./terminal-text.ts";

/** Progress of a long step (a graceful kill waits for the agent), on stderr so --json output stays one document. */
function progressLine(step: string): void {
  process.stderr.write(`… ${step}\n`);
}

function warningLines(warnings: readonly string[] | undefined): string[] {
  return (warnings ?? []).map((warning) => `warning: ${terminalLine(cliWords(warning), 2_000)}`);
}

/** A yes/no question on the terminal; none when stdin or stdout is not one (a script must name what it answers). */
function terminalConfirm(): Confirm | undefined {
  if (!process.stdin.isTTY || !process.stdout.isTTY) return undefined;
  return async (question) => {
    const prompt = createInterface({ input: process.stdin, output: process.stdout });
    try {
      return /^y(es)?$/i.test((await prompt.question(question)).trim());
    } finally {
      prompt.close();
    }
  };
}

function answerCommand(name: "approve" | "deny"): CommandSpec {
  const approve = name === "approve";
  return {
    name,
    args: `<team> <agent>${approve ? " [--always] [--message <text>]" : " [--message <text>]"} [--request <id>]`,
    summary: approve
      ? "Allow the permission request (or answer the question) an agent waits on."
      : "Refuse the permission request an agent waits on.",
    details: [
      "The agent is named by name or id. The request it waits on is shown, then answered by its id only: on a terminal",
      "after you confirm it, in a script only with --request <id> (ids: `status --json`, waiting.requestId). A",
      "request that changed meanwhile (answered in the pane, replaced) is refused, never answered unseen.",
    ],
    options: {
      ...(approve
        ? {
            always: {
              type: "boolean" as const,
              help: 'allow it and what its "always" patterns cover (shown), in its directory until the server stops',
            },
          }
        : {}),
      message: {
        type: "string",
        valueName: "text",
        help: approve ? "the answer to a question" : "why, told to the agent",
      },
      request: {
        type: "string",
        valueName: "id",
        help: "answer this request id only (from `status --json`)",
      },
    },
    examples: approve
      ? ["opencode-teams approve my-team worker-1", "opencode-teams approve my-team worker-1 --always"]
      : ["opencode-teams deny my-team worker-1 --message 'no pushes, please'"],
    json: false,
    arity: [2, 2],
    async run({ ctx, args, values, print }) {
      const team = await teamOrFail(ctx, args[0] ?? "");
      const agent = await resolveAgent(ctx, team, args[1] ?? "");
      const message = stringOption(values, "message");
      const request = stringOption(values, "request");
      if (request === "") throw new UsageError("--request needs a request id");
      return runAnswer(
        ctx,
        name,
        [team.name, agent.agentId],
        {
          always: values.always === true,
          ...(message !== undefined ? { message } : {}),
          ...(request !== undefined ? { request } : {}),
        },
        // It quotes the agent's request, written by its model: one escaped line per line it prints.
        (text) => print(terminalLine(text)),
        terminalConfirm(),
      );
    },
  };
}

export const ACT_COMMANDS: CommandSpec[] = [
  {
    name: "send",
    args: "<team> <to> <message...>",
    summary: 'Send a message as "human" to an agent (name or id), "leader" or "all".',
    examples: [
      "opencode-teams send my-team worker-1 also check the tests",
      "opencode-teams send my-team all stop and commit",
    ],
    json: true,
    arity: [3, Number.POSITIVE_INFINITY],
    async run({ ctx, args, show }) {
      const [teamName = "", to = "", ...words] = args;
      const team = await teamOrFail(ctx, teamName);
      const recipient = to === "leader" || to === "all" ? to : (await resolveAgent(ctx, team, to)).agentId;
      const sent = await cliSend(ctx, team.name, recipient, words);
      if (!sent.success) throw new CliFailure(cliWords(sent.error));
      show(sent, () => [sentSentence(sent), ...warningLines(sent.warnings)].join("\n"));
      return 0;
    },
  },
  answerCommand("approve"),
  answerCommand("deny"),
  {
    name: "kill",
    args: "<team> <agent> [--force] [--reason <text>]",
    summary:
      "Stop an agent: asked to finish and confirm (graceful), or at once with --force. Its tasks go back to pending.",
    details: ["The leader is told that a person stopped it."],
    options: {
      force: { type: "boolean", help: "stop at once, without asking the agent to finish" },
      reason: { type: "string", valueName: "text", help: "why; shown to the agent and kept in its record" },
    },
    examples: [
      "opencode-teams kill my-team worker-2",
      "opencode-teams kill my-team worker-2 --force --reason stuck",
    ],
    json: true,
    arity: [2, 2],
    async run({ ctx, args, values, show }) {
      const reason = stringOption(values, "reason");
      const result = await cliKill(
        ctx,
        {
          teamName: args[0] ?? "",
          who: args[1] ?? "",
          force: values.force === true,
          ...(reason ? { reason } : {}),
        },
        progressLine,
      );
      show(result, () =>
        [
          `Stopped ${result.agent} (${shortId(result.agentId)}): ${result.method}, ${result.phase}.`,
          result.reassignedTasks.length > 0 ? `Back to pending: ${result.reassignedTasks.join(", ")}.` : "",
          ...warningLines(result.warnings),
        ]
          .filter(Boolean)
          .join("\n"),
      );
      return 0;
    },
  },
  {
    name: "resume",
    args: "<team> <agent> [--prompt <text>]",
    summary:
      "Run an ended agent again, on its old session when the server still has it (its conversation goes on).",
    details: [
      "Starts the project's OpenCode server if it is not running. The leader is told that a person resumed it.",
    ],
    options: { prompt: { type: "string", valueName: "text", help: "what to tell it when it continues" } },
    examples: [
      "opencode-teams resume my-team worker-1",
      "opencode-teams resume my-team worker-1 --prompt 'finish the tests'",
    ],
    json: true,
    arity: [2, 2],
    async run({ ctx, args, values, show }) {
      const prompt = stringOption(values, "prompt");
      const result = await cliResume(
        ctx,
        { teamName: args[0] ?? "", who: args[1] ?? "", ...(prompt ? { prompt } : {}) },
        progressLine,
      );
      show(result, () =>
        [
          `Resumed as ${result.name} (${shortId(result.agentId)})${result.sessionReused ? " on its old session" : " on a new session"}${result.paneId ? `, pane ${result.paneId}` : ""}.`,
          `Look at it: opencode-teams attach ${args[0]} ${result.name}`,
          ...warningLines(result.warnings),
        ].join("\n"),
      );
      return 0;
    },
  },
  {
    name: "merge",
    args: "<team> <agent> [--squash] [--force] [--message <text>]",
    summary:
      "Bring an agent's branch into your current branch, in your checkout; refused, changing nothing, when unsafe.",
    options: {
      squash: { type: "boolean", help: "one commit instead of a merge commit" },
      force: { type: "boolean", help: "merge what a still-running agent has committed so far" },
      message: { type: "string", valueName: "text", help: "the commit message" },
    },
    examples: ["opencode-teams merge my-team worker-1", "opencode-teams merge my-team worker-1 --squash"],
    json: true,
    arity: [2, 2],
    async run({ ctx, args, values, show }) {
      const message = stringOption(values, "message");
      const result = await cliMerge(ctx, {
        teamName: args[0] ?? "",
        who: args[1] ?? "",
        squash: values.squash === true,
        force: values.force === true,
        ...(message ? { message } : {}),
      });
      show(result, () =>
        [
          `Merged ${result.branch} into ${result.into} (${result.strategy}, ${result.merged.length} commit(s), ${result.files.length} file(s)): ${result.commit.slice(0, 12)}.`,
          result.worktreeRemoved ? "The agent's worktree and branch were removed." : "",
          ...warningLines(result.warnings),
        ]
          .filter(Boolean)
          .join("\n"),
      );
      return 0;
    },
  },
  {
    name: "attach",
    args: "<team> [agent]",
    summary: "Take this terminal to the team's tmux window, or to an agent's pane (by name or id).",
    details: [
      "Inside tmux it switches your client there; outside, it attaches (detach again with your tmux prefix, d).",
    ],
    options: { print: { type: "boolean", help: "print the tmux commands instead of running them" } },
    examples: ["opencode-teams attach my-team", "opencode-teams attach my-team worker-1"],
    json: false,
    arity: [1, 2],
    async run({ ctx, args, values, print }) {
      const plan = await attachTarget(ctx, args[0] ?? "", args[1]);
      if (values.print === true) {
        print(plan.argv.map((argv) => argv.join(" ")).join("\n"));
        return 0;
      }
      const code = await runAttach(plan);
      if (code !== 0) throw new CliFailure(`tmux exited with ${code}.`);
      return 0;
    },
  },
];

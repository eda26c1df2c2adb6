import { type CommandSpec, UsageError } from "./command.ts";
import { renderDoctor, runDoctor } from "./doctor.ts";
import { nextSteps, renderInit, runInit } from "./init.ts";
import { runServerCommand } from "./server.ts";
import { terminalBlock } from "./terminal-text.ts";

export const SETUP_COMMANDS: CommandSpec[] = [
  {
    name: "doctor",
    args: "",
    summary:
      "Check tmux, opencode, the storage dir, the project server and whether the plugin is configured and loads.",
    details: ["Each problem comes with its fix. Exit code 1 when a check fails."],
    examples: ["opencode-teams doctor", "opencode-teams doctor --json"],
    json: true,
    arity: [0, 0],
    async run({ ctx, paint, show }) {
      const report = await runDoctor(ctx);
      show(report, () => renderDoctor(report, paint));
      return report.ok ? 0 : 1;
    },
  },
  {
    name: "init",
    args: "[--global] [--undo]",
    summary: "Add the plugin to the project's OpenCode config (or your own with --global), then run doctor.",
    details: [
      "Only the plugin list changes; comments and formatting stay. --undo takes the entry out again.",
    ],
    options: {
      global: {
        type: "boolean",
        help: "edit $XDG_CONFIG_HOME/opencode/opencode.json instead of the project's",
      },
      undo: { type: "boolean", help: "take the plugin out again" },
    },
    examples: ["opencode-teams init", "opencode-teams init --undo"],
    json: false,
    arity: [0, 0],
    async run({ ctx, projectRoot, values, paint, print }) {
      const init = await runInit({
        projectRoot,
        scope: values.global === true ? "global" : "project",
        undo: values.undo === true,
      });
      print(renderInit(init));
      if (values.undo === true) return 0;
      const report = await runDoctor(ctx);
      print(`${renderDoctor(report, paint)}\n\n${nextSteps(projectRoot, init)}`);
      return report.ok ? 0 : 1;
    },
  },
  {
    name: "server",
    args: "status|stop",
    summary: "The project's OpenCode server (the one the agents run on): is it ours and healthy; or stop it.",
    details: ["stop only ever signals a process verified to be the server this project started."],
    examples: ["opencode-teams server status", "opencode-teams server stop"],
    json: true,
    arity: [1, 1],
    async run({ ctx, args, show }) {
      const [action] = args;
      if (action !== "status" && action !== "stop") throw new UsageError(`'${action}' is not status or stop`);
      const result = await runServerCommand(ctx, action);
      show(result.output, () => terminalBlock(result.text));
      return result.code;
    },
  },
];

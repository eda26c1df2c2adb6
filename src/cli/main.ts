#!/usr/bin/env bun
// opencode-teams for the person at the terminal: look at the teams, and act on them as the leader's tools do.
// Exit codes: 0 done, 1 the command could not do it, 2 the command line is wrong.
import packageJson from "../../package.json" with { type: "json" };
import { UnavailableOpencodeApi } from "../edges/unavailable.ts";
import { buildContext } from "../plugin.ts";
import { cliWords } from "./cli-words.ts";
import { CliFailure, type CommandSpec, commandHelp, parseCommand, UsageError, usageLine } from "./command.ts";
import { ACT_COMMANDS } from "./commands-act.ts";
import { LOOK_COMMANDS } from "./commands-look.ts";
import { SETUP_COMMANDS } from "./commands-setup.ts";
import { painter } from "./format.ts";
import { camelKeys } from "./json-keys.ts";
import { projectPluginOptions } from "./plugin-options.ts";
import { findProjectRoot } from "./project.ts";
import { terminalBlock, terminalJson, terminalLine } from "./terminal-text.ts";

export const COMMANDS: readonly CommandSpec[] = [...LOOK_COMMANDS, ...ACT_COMMANDS, ...SETUP_COMMANDS];

function overview(): string {
  const width = Math.max(...COMMANDS.map((spec) => usageLine(spec).length));
  return [
    "opencode-teams: see and steer your agent teams",
    "",
    "usage:",
    ...COMMANDS.map((spec) => `  ${usageLine(spec).padEnd(width)}  ${spec.summary.split(/(?<=[.:])\s/)[0]}`),
    `  ${"opencode-teams help [command]".padEnd(width)}  this text, or one command's usage and examples`,
    "",
    "An agent is named by its name (worker-1) or its id (the ID column of status, or any 4+ leading characters).",
    "options for every command: --dir <path> (the project), --json (data and errors as JSON), --no-color, --help",
    "exit codes: 0 done, 1 could not do it, 2 wrong command line; `opencode-teams --version` prints the version",
  ].join("\n");
}

function specOf(name: string | undefined): CommandSpec | undefined {
  return COMMANDS.find((spec) => spec.name === name);
}

function write(stream: NodeJS.WriteStream, text: string): void {
  stream.write(text.endsWith("\n") ? text : `${text}\n`);
}

/** An error, as JSON on stdout with --json (one document to parse), else as text on stderr. */
function report(
  json: boolean,
  error: { message: string; next?: string; usage?: string },
  code: number,
): number {
  if (json) {
    const { message, ...rest } = error;
    write(process.stdout, terminalJson({ success: false, exitCode: code, error: message, ...rest }, 2));
  } else {
    // An error may quote state (an agent's name, git's stderr about its branch): escaped like any output.
    const lines = [`opencode-teams: ${terminalBlock(error.message)}`];
    if (error.next) lines.push(`next: ${error.next}`);
    if (error.usage) lines.push(`usage: ${error.usage}`, "(opencode-teams help for every command)");
    write(process.stderr, lines.join("\n"));
  }
  return code;
}

async function main(argv: string[]): Promise<number> {
  // The bin launcher may run us on OpenCode's binary acting as Bun; the opencode we start ourselves must be OpenCode.
  delete process.env.BUN_BE_BUN;
  const json = argv.includes("--json");
  const [first, ...rest] = argv;
  if (first === "--version" || first === "-v" || first === "version") {
    write(process.stdout, json ? JSON.stringify({ version: packageJson.version }) : packageJson.version);
    return 0;
  }
  if (first === undefined || first === "help" || first === "--help" || first === "-h") {
    const topic = first === "help" ? rest.find((word) => !word.startsWith("-")) : undefined;
    const spec = specOf(topic);
    if (topic && !spec)
      return report(
        json,
        { message: `unknown command '${terminalLine(topic, 80)}'`, usage: "opencode-teams help" },
        2,
      );
    write(first === undefined ? process.stderr : process.stdout, spec ? commandHelp(spec) : overview());
    return first === undefined ? 2 : 0;
  }
  const spec = specOf(first);
  if (!spec) {
    return report(
      json,
      { message: `unknown command '${terminalLine(first, 80)}'`, usage: "opencode-teams help" },
      2,
    );
  }
  try {
    return await runCommand(spec, rest, json);
  } catch (error) {
    if (error instanceof UsageError)
      return report(json, { message: error.message, usage: usageLine(spec) }, 2);
    if (error instanceof CliFailure) {
      return report(json, { message: error.message, ...(error.next ? { next: error.next } : {}) }, 1);
    }
    return report(json, { message: cliWords(error instanceof Error ? error.message : String(error)) }, 1);
  }
}

async function runCommand(spec: CommandSpec, argv: string[], json: boolean): Promise<number> {
  const { args, values } = parseCommand(spec, argv);
  if (values.help) {
    write(process.stdout, commandHelp(spec));
    return 0;
  }
  const projectRoot = findProjectRoot(typeof values.dir === "string" ? values.dir : process.cwd());
  const ctx = buildContext({
    projectRoot,
    options: projectPluginOptions(projectRoot, (text) => write(process.stderr, `warning: ${text}`)),
    log: () => {},
    localServer: new UnavailableOpencodeApi("the CLI has no OpenCode server of its own"),
  });
  const paint = painter(
    Boolean(process.stdout.isTTY) && values["no-color"] !== true && !json && !process.env.NO_COLOR,
  );
  const print = (text: string) => write(process.stdout, text);
  const show = (data: unknown, text: () => string) => print(json ? terminalJson(camelKeys(data), 2) : text());
  return spec.run({ args, values, projectRoot, ctx, paint, json, print, show });
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`opencode-teams: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}

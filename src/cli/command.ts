import { parseArgs } from "node:util";
import type { TeamsContext } from "../operations/context.ts";
import type { Painter } from "./format.ts";

/** A mistake in the command line: the usage is printed and the exit code is 2. */
export class UsageError extends Error {}

/** The command ran and could not do what was asked: the message is printed and the exit code is 1. */
export class CliFailure extends Error {
  constructor(
    message: string,
    /** What the person can run next, when there is one thing to say. */
    readonly next?: string,
  ) {
    super(message);
  }
}

type OptionSpec = { type: "boolean" } | { type: "string"; valueName: string };

/** Options every command takes. */
export const GLOBAL_OPTIONS = {
  dir: { type: "string", valueName: "path" },
  json: { type: "boolean" },
  "no-color": { type: "boolean" },
  help: { type: "boolean" },
} as const satisfies Record<string, OptionSpec>;

export interface CommandSpec {
  name: string;
  /** The arguments after the command's name, e.g. `<team> <agent> [--force]`. */
  args: string;
  summary: string;
  /** Lines of more detail for `<command> --help`. */
  details?: string[];
  examples: string[];
  options?: Record<string, OptionSpec & { help: string }>;
  /** Whether --json means anything for this command. */
  json: boolean;
  /** Positionals: the fewest and the most the command takes (Infinity: the rest of the line). */
  arity: [number, number];
  run(invocation: Invocation): Promise<number>;
}

export type OptionValues = Record<string, string | boolean | undefined>;

/** What every command gets: its arguments, the project, its context and ways to print. */
export interface Invocation {
  args: string[];
  values: OptionValues;
  projectRoot: string;
  ctx: TeamsContext;
  paint: Painter;
  json: boolean;
  print(text: string): void;
  /** `data` as JSON with --json, else `text()`. */
  show(data: unknown, text: () => string): void;
}

export function usageLine(spec: CommandSpec): string {
  return `opencode-teams ${spec.name}${spec.args ? ` ${spec.args}` : ""}`;
}

export function commandHelp(spec: CommandSpec): string {
  const options = Object.entries(spec.options ?? {}).map(([name, option]) => {
    const flag = option.type === "string" ? `--${name} <${option.valueName}>` : `--${name}`;
    return `  ${flag.padEnd(24)} ${option.help}`;
  });
  return [
    `usage: ${usageLine(spec)}`,
    "",
    spec.summary,
    ...(spec.details ? ["", ...spec.details] : []),
    ...(options.length > 0 ? ["", "options:", ...options] : []),
    `  ${"--dir <path>".padEnd(24)} the project (default: the git checkout around the current directory)`,
    ...(spec.json ? [`  ${"--json".padEnd(24)} machine-readable output (errors too)`] : []),
    "",
    "examples:",
    ...spec.examples.map((example) => `  ${example}`),
  ].join("\n");
}

/** The command's own options and positionals; anything it does not know is a UsageError. */
export function parseCommand(spec: CommandSpec, argv: string[]): { args: string[]; values: OptionValues } {
  const own = Object.fromEntries(
    Object.entries(spec.options ?? {}).map(([name, option]) => [name, { type: option.type }]),
  );
  const global = Object.fromEntries(
    Object.entries(GLOBAL_OPTIONS).map(([name, option]) => [name, { type: option.type }]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { ...global, ...own, h: { type: "boolean", short: "h" } },
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? cleanParseError(error.message) : String(error));
  }
  const values: OptionValues = {};
  // No option is declared `multiple`, so no value is an array.
  for (const [name, value] of Object.entries(parsed.values)) if (!Array.isArray(value)) values[name] = value;
  if (values.h) values.help = true;
  if (values.json && !spec.json) throw new UsageError(`'${spec.name}' has no --json output`);
  const args = parsed.positionals;
  if (!values.help) {
    const [fewest, most] = spec.arity;
    if (args.length < fewest) throw new UsageError("missing arguments");
    if (args.length > most) throw new UsageError(`unexpected argument '${args[most]}'`);
  }
  return { args, values };
}

/** node:util's messages name its own API ("To specify a positional argument starting with a '-'..."): keep the gist. */
function cleanParseError(message: string): string {
  const first = message.split(/\.\s/)[0] ?? message;
  return first.replace(/^Unknown option/, "unknown option").replace(/^Option/, "option");
}

/** A string option's value, or undefined when absent. */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

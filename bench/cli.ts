/** `npm run bench`'s options: the two modes, `--only`, and the usage a mistyped option is answered with. */

export interface BenchArgs {
  /** The long paired run that rewrites the README's table; otherwise the short run. */
  full: boolean;
  /** No waiting for the load and the disk before each group. */
  noWait: boolean;
  /** Figure groups to run (all when undefined). */
  only: ReadonlySet<string> | undefined;
}

export type Parsed = { kind: "run"; args: BenchArgs } | { kind: "help" } | { kind: "error"; message: string };

export function usage(groups: readonly { id: string; what: string }[]): string {
  const list = groups.map((g) => `                   ${g.id.padEnd(3)} ${g.what}`).join("\n");
  return `Usage: npm run bench -- [--full] [--only <groups>] [--no-wait] [--help]

Times each figure of opencode-teams beside its floor (the least work any implementation must do for it, measured in
the same run) and prints the ratios in a table. bench/README.md explains the method and how to read the table.

  (no option)      The short run: every figure group with few rounds and short waits before each group (at most
                   20 s for the load, none once it stops falling, and 10 s for the disk). About 3-4 minutes on a
                   quiet 2-core machine. Its ratios are rougher than a full run's; the README is left alone.
  --full           The long paired run: many rounds, spread out in time, and waits of up to 150 s for the load and
                   120 s for the disk before each group. About 30 minutes on a quiet 2-core machine. A complete
                   --full run of every group rewrites the table in README.md.
  --only <groups>  Only these groups, comma-separated (--only 1,3 or --only=1,3), in either mode; never touches
                   the README. The groups:
${list}
  --no-wait        Start each group at once, without waiting for the load and the disk: for trying a figure out;
                   its ratios then depend on what ran just before it.
  --quick          The same as no option (the short run).
  --help, -h       This text.

Writes bench/results/latest.json. Ctrl-C stops every process, server and tmux server the bench started and removes
its temporary projects.`;
}

/** The options, or why they are refused (an unknown option, an unknown group, --full with --quick). */
export function parseArgs(argv: readonly string[], groupIds: readonly string[]): Parsed {
  let full = false;
  let quick = false;
  let noWait = false;
  let only: Set<string> | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--help" || arg === "-h") return { kind: "help" };
    if (arg === "--full") full = true;
    else if (arg === "--quick") quick = true;
    else if (arg === "--no-wait") noWait = true;
    else if (arg === "--only" || arg.startsWith("--only=")) {
      const list = arg === "--only" ? argv[++i] : arg.slice("--only=".length);
      if (!list || list.startsWith("-")) return { kind: "error", message: "--only needs a list of groups" };
      only = new Set(list.split(",").map((s) => s.trim()));
      const unknown = [...only].filter((id) => !groupIds.includes(id));
      if (unknown.length > 0)
        return {
          kind: "error",
          message: `no figure group ${unknown.join(", ")} (groups: ${groupIds.join(", ")})`,
        };
    } else return { kind: "error", message: `unknown option ${JSON.stringify(arg)}` };
  }
  if (full && quick) return { kind: "error", message: "--full and --quick are the two modes: pick one" };
  return { kind: "run", args: { full, noWait, only } };
}

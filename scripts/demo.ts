#!/usr/bin/env bun
/**
 * `npm run demo`: the scenario of scripts/scenario.ts, live, on this machine, with nothing configured and offline.
 * Every process runs on 127.0.0.1 from temp dirs, the panes on a private tmux server; all of it is stopped at the end
 * (also on Ctrl-C or an error) unless --keep.
 */
import { parseArgs } from "node:util";
import { hasTmux, serverRunning } from "../tests/e2e/harness/tmux.ts";
import {
  keptProcesses,
  REAL_MODEL_TIMING,
  runScenario,
  SCRIPTED_TIMING,
  type ScenarioEnv,
  type ScenarioRecord,
  startScenarioEnv,
} from "./scenario.ts";

export const DEFAULT_SOCKET = "opencode-teams-demo";

const USAGE = `npm run demo [-- options]

Runs the opencode-teams scenario live: a leader creates a team and two tasks, spawns two workers into tmux panes,
one worker is killed and declared inactive, the leader resumes it on its old session, both finish.

options:
  --model <provider/model>  use a real model from your own OpenCode configuration instead of the scripted one
  --keep                    leave everything running at the end (Ctrl-C then stops it)
  --socket <name>           private tmux socket (default ${DEFAULT_SOCKET})
  --pause <ms>              pause after each step (default 1500)
  --no-color                plain output
  -h, --help                this text`;

export interface DemoOptions {
  socket: string;
  realModel?: string;
  keep: boolean;
  pauseMs: number;
  color: boolean;
  print: (line: string) => void;
}

export interface DemoRun {
  record: ScenarioRecord;
  /** Still running when `keep`; stopped otherwise. */
  env: ScenarioEnv;
}

/** Called with the environment as soon as it exists, so a signal handler can stop it. */
export type EnvListener = (env: ScenarioEnv) => void;

export async function runDemo(options: DemoOptions, onEnv: EnvListener = () => {}): Promise<DemoRun> {
  const { print } = options;
  if (!hasTmux()) throw new Error("tmux is required: install it (apt-get install tmux / brew install tmux)");
  if (serverRunning(options.socket)) {
    throw new Error(
      `a tmux server already runs on the socket '${options.socket}' (an earlier demo with --keep?). ` +
        `Stop it with: tmux -L ${options.socket} kill-server   or pick another --socket`,
    );
  }
  const timing = options.realModel ? REAL_MODEL_TIMING : SCRIPTED_TIMING;
  print("opencode-teams demo");
  if (options.realModel) {
    print(
      `MODEL: ${options.realModel}, from your own OpenCode configuration (real answers; it may be slow or stray)`,
    );
  } else {
    print(
      "MODEL: SCRIPTED. No AI runs here: every agent's answers come from a scripted mock model on 127.0.0.1",
    );
    print(
      "       that calls the tools its prompt names (see scripts/scenario.ts). The plugin, OpenCode, tmux and",
    );
    print("       the panes are all real.");
  }
  print(
    `Timings: stale after ${timing.staleThresholdMs / 1000} s without a heartbeat, sweep every ${
      timing.sweepIntervalMs / 1000
    } s (the plugin's defaults are 60 s and 15 s).`,
  );
  print("Starting OpenCode with the plugin...");
  const env = await startScenarioEnv({
    socket: options.socket,
    say: print,
    pauseMs: options.pauseMs,
    color: options.color,
    ...(options.realModel ? { realModel: options.realModel } : {}),
  });
  onEnv(env);
  print(`OpenCode server (the leader's): ${env.server.url}, project ${env.server.projectDir}`);
  let record: ScenarioRecord;
  try {
    record = await runScenario(env);
  } catch (error) {
    print("");
    print(`The demo failed: ${error instanceof Error ? error.message : String(error)}`);
    print(`Last lines of the OpenCode server log (${env.server.logPath}):`);
    print(env.server.logTail(20));
    if (!options.keep) await env.stop();
    throw error;
  }
  print("");
  print(`Done in ${(record.durationMs / 1000).toFixed(1)} s.`);
  if (!options.keep) {
    await env.stop();
    print("Stopped every process the demo started and removed its temp dirs.");
  }
  return { record, env };
}

function parseDemoArgs(argv: string[]): (Omit<DemoOptions, "print"> & { help: boolean }) | string {
  const parse = (args: string[]) =>
    parseArgs({
      args,
      options: {
        model: { type: "string" },
        keep: { type: "boolean", default: false },
        socket: { type: "string", default: DEFAULT_SOCKET },
        pause: { type: "string", default: "1500" },
        "no-color": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  const pauseMs = Number(values.pause);
  if (!Number.isFinite(pauseMs) || pauseMs < 0) return `--pause wants milliseconds, got '${values.pause}'`;
  if (values.model !== undefined && !/^[^/\s]+\/\S+$/.test(values.model))
    return `--model wants provider/model, got '${values.model}'`;
  if (!/^[A-Za-z0-9_-]+$/.test(values.socket)) return `--socket wants a plain name, got '${values.socket}'`;
  return {
    socket: values.socket,
    ...(values.model !== undefined ? { realModel: values.model } : {}),
    keep: values.keep,
    pauseMs,
    color: Boolean(process.stdout.isTTY) && !values["no-color"] && !process.env.NO_COLOR,
    help: values.help,
  };
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseDemoArgs(argv);
  const print = (line: string) => process.stdout.write(`${line}\n`);
  if (typeof parsed === "string") {
    process.stderr.write(`${parsed}\n\n${USAGE}\n`);
    return 2;
  }
  if (parsed.help) {
    print(USAGE);
    return 0;
  }
  let env: ScenarioEnv | undefined;
  let stopping = false;
  const stopAndExit = (code: number) => {
    if (stopping) return;
    stopping = true;
    print("\nStopping everything the demo started...");
    void (env?.stop() ?? Promise.resolve())
      .then(
        () => print("Stopped every process the demo started and removed its temp dirs."),
        (error: unknown) =>
          print(
            `Stopping failed: ${error instanceof Error ? error.message : String(error)}; see the commands above.`,
          ),
      )
      .finally(() => process.exit(code));
  };
  process.on("SIGINT", () => stopAndExit(130));
  process.on("SIGTERM", () => stopAndExit(143));
  process.on("SIGHUP", () => stopAndExit(129));
  const run = await runDemo({ ...parsed, print }, (started) => {
    env = started;
  });
  if (!parsed.keep) return 0;
  print("");
  print("--keep: everything is still running.");
  print(`  panes and the status window:  ${run.record.attachCommand}`);
  print(
    `  reviewer-1, still at work:     npm run cli -- attach ${run.record.team} reviewer-1 --dir ${run.record.projectDir}`,
  );
  print(
    `  status from a shell:          npm run cli -- status ${run.record.team} --all --dir ${run.record.projectDir}`,
  );
  print(
    `  history:                      npm run cli -- history ${run.record.team} --dir ${run.record.projectDir}`,
  );
  print(`  the leader's OpenCode:        ${run.env.server.url}`);
  print(
    `Press Ctrl-C here to stop it all (the scripted model lives in this process). If this process is killed, its`,
  );
  print(
    `watchers stop the rest; by hand: tmux -L ${parsed.socket} kill-server; kill ${keptProcesses(run.env).join(" ")}`,
  );
  // Stay alive until a signal: the handlers above stop everything and exit.
  await new Promise<never>(() => {});
  return 0;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}

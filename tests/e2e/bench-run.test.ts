/**
 * `npm run bench` from outside: its options, and Ctrl-C in the middle of it, twice (the second one during the cleanup
 * the first started), or a SIGTERM, once the bench's figure 6 has real servers up: a leader's `opencode serve`, the project server
 * the plugin started from inside it, a private tmux server with an agent's `opencode attach` pane. Nothing of it may
 * be left afterwards.
 *
 * What the bench started is found here without the bench's own bookkeeping: the processes below it in the process
 * tree, the tmux servers on sockets named after its PID and their panes, and every process whose environment carries
 * the TMPDIR this test gave it (the project server and the tmux server leave the tree; they keep the environment).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { tmux } from "./harness/index.ts";
import { removeSocketFile } from "./tmux-socket-file.ts";

const REPO_ROOT = path.resolve(import.meta.dir, "..", "..");
const TMUX_DIR = path.join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`);

interface Proc {
  pid: number;
  started: string;
  command: string;
}

function readProc(
  pid: number,
): { ppid: number; started: string; command: string; environ: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const command = readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ").trim();
    const environ = readFileSync(`/proc/${pid}/environ`, "latin1");
    // A zombie has no command line left: it is dead, waiting for its parent.
    if (fields[0] === "Z") return undefined;
    return { ppid: Number(fields[1]), started: fields[19] ?? "", command, environ };
  } catch {
    return undefined;
  }
}

function allPids(): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number);
}

/** The processes below `root` in the process tree. */
function descendants(root: number): Proc[] {
  const table = allPids().flatMap((pid) => {
    const info = readProc(pid);
    return info ? [{ pid, ...info }] : [];
  });
  const found: Proc[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of table)
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
  }
  return found;
}

/** Every process whose environment carries `TMPDIR=<under dir>`. */
function carryingTmp(dir: string): Proc[] {
  return allPids().flatMap((pid) => {
    const info = readProc(pid);
    if (!info?.environ.split("\0").some((entry) => entry.startsWith(`TMPDIR=${dir}`))) return [];
    return [{ pid, started: info.started, command: info.command }];
  });
}

/** The bench's tmux sockets: named `otbench-<its pid>-…`. */
function benchSockets(benchPid: number): string[] {
  try {
    return readdirSync(TMUX_DIR).filter((name) => name.startsWith(`otbench-${benchPid}-`));
  } catch {
    return [];
  }
}

/** A tmux server's own process and its panes' processes. */
function tmuxProcesses(socket: string): Proc[] {
  const server = Number(tmux.tmux(socket, ["display-message", "-p", "#{pid}"]).stdout.trim());
  const panes = tmux.listPanes(socket).map((pane) => pane.panePid);
  return [server, ...panes].flatMap((pid) => {
    const info = pid > 0 ? readProc(pid) : undefined;
    return info ? [{ pid, started: info.started, command: info.command }] : [];
  });
}

function alive(p: Proc): boolean {
  return readProc(p.pid)?.started === p.started;
}

/** Poll until `ready` holds, the bench has exited, or `timeoutMs` passed; whether it held. */
async function until(ready: () => boolean, exited: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !exited()) {
    if (ready()) return true;
    await Bun.sleep(250);
  }
  return false;
}

const tmpRoot = realpathSync(mkdtempSync(path.join(os.tmpdir(), "oct-bench-int-")));
/** What the tests saw the benches start, and the benches: cleaned up here whatever the benches did. */
const seen: Proc[] = [];
const sockets: string[] = [];
const benches: ReturnType<typeof Bun.spawn>[] = [];

afterAll(async () => {
  for (const bench of benches)
    if (bench.exitCode === null && bench.signalCode === null) {
      bench.kill("SIGKILL");
      await bench.exited;
    }
  // What the bench failed to stop, this test must not leave behind either.
  for (const p of seen.filter(alive)) process.kill(p.pid, "SIGKILL");
  for (const socket of sockets) {
    tmux.killServer(socket);
    removeSocketFile(socket);
  }
  rmSync(tmpRoot, { recursive: true, force: true });
});

/** Start `bench/run.ts --only 6`, and wait until its first spawn-agent has the project server and a pane up. */
async function benchMidSpawn(tmp: string) {
  const started = Bun.spawn([process.execPath, "bench/run.ts", "--only", "6", "--no-wait"], {
    cwd: REPO_ROOT,
    env: { ...process.env, TMPDIR: tmp },
    stdout: "ignore",
    stderr: "pipe",
  });
  benches.push(started);
  const log = new Response(started.stderr).text();
  let exited = false;
  void started.exited.then(() => {
    exited = true;
  });
  const servers = () => carryingTmp(tmp).filter((p) => / serve( |$)/.test(p.command)).length;
  const panes = () => benchSockets(started.pid).flatMap((s) => tmux.listPanes(s)).length;
  const reached = await until(
    () => servers() >= 2 && panes() >= 1,
    () => exited,
    80_000,
  );
  if (!reached) throw new Error(`the bench never had its servers and a pane up:\n${exited ? await log : ""}`);
  const itsSockets = benchSockets(started.pid);
  sockets.push(...itsSockets);
  const itsProcesses = [
    ...descendants(started.pid),
    ...itsSockets.flatMap(tmuxProcesses),
    ...carryingTmp(tmp),
  ].filter((p, i, all) => all.findIndex((q) => q.pid === p.pid) === i);
  seen.push(...itsProcesses);
  return { bench: started, processes: itsProcesses };
}

// Figure 6 needs tmux, and the process scan /proc.
describe.skipIf(!tmux.hasTmux() || !existsSync("/proc"))("bench interrupted", () => {
  test.each([
    {
      how: "Ctrl-C twice (the second during the cleanup)",
      signals: ["SIGINT", "SIGINT"] as const,
      code: 130,
    },
    { how: "SIGTERM", signals: ["SIGTERM"] as const, code: 143 },
  ])(
    "$how while real servers and tmux panes are up leaves no process, tmux socket or temp project",
    async ({ signals, code }) => {
      const tmp = mkdtempSync(path.join(tmpRoot, "run-"));
      const { bench, processes } = await benchMidSpawn(tmp);
      for (const [n, signal] of signals.entries()) {
        // A second signal lands in the cleanup the first started (its SIGTERM grace alone lasts up to 3 s).
        if (n > 0) await Bun.sleep(100);
        bench.kill(signal);
      }
      const exit = await Promise.race([bench.exited, Bun.sleep(30_000).then(() => "still running")]);
      expect(exit).toBe(code);

      expect(processes.filter(alive).map((p) => `${p.pid} ${p.command}`)).toEqual([]);
      expect(carryingTmp(tmp).map((p) => `${p.pid} ${p.command}`)).toEqual([]);
      expect(benchSockets(bench.pid)).toEqual([]);
      expect(readdirSync(tmp)).toEqual([]);
    },
    150_000,
  );
});

describe("bench options", () => {
  /** Run the bench with `args`; its exit code and output, or undefined if it still runs after `timeoutMs`. */
  async function bench(args: string[], timeoutMs = 20_000) {
    const child = Bun.spawn([process.execPath, "bench/run.ts", ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, TMPDIR: tmpRoot },
      stdout: "pipe",
      stderr: "pipe",
    });
    const code = await Promise.race([child.exited, Bun.sleep(timeoutMs).then(() => undefined)]);
    if (code === undefined) {
      // A run that started: interrupt it as a person would, so it cleans up after itself.
      child.kill("SIGINT");
      await child.exited;
      return undefined;
    }
    return {
      code,
      stdout: await new Response(child.stdout).text(),
      stderr: await new Response(child.stderr).text(),
    };
  }

  test("--help prints the usage and runs nothing", async () => {
    const out = await bench(["--help"]);
    expect(out?.code).toBe(0);
    expect(out?.stdout).toContain("Usage: npm run bench");
    expect(out?.stdout).toContain("--full");
  }, 40_000);

  test("an unknown option is refused with the usage, exit 2, and runs nothing", async () => {
    const out = await bench(["--ful"]);
    expect(out?.code).toBe(2);
    expect(out?.stderr).toContain('unknown option "--ful"');
    expect(out?.stderr).toContain("Usage: npm run bench");
  }, 40_000);
});

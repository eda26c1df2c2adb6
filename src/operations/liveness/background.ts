import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { TeamsContext } from "../context.ts";
import type { MessageWatch, Watched } from "./message-watch.ts";
import { EventMonitor } from "./monitor.ts";
import { StaleSweeper } from "./sweep.ts";
import { enforceTimeouts } from "./timeouts.ts";

/**
 * The liveness loops: each waits by `ctx.clock` in the background, so none keeps the process alive. OpenCode loads
 * the plugin in several processes, and within one process once per directory instance (and twice when it is
 * configured globally and per project): the monitor and the sweep run once per process and storage root, shared by
 * every plugin instance that uses that root, and stop when the last instance is disposed. Two processes running them
 * is harmless (see sweep.ts and monitor.ts).
 */

export interface LivenessTiming {
  /** First wait before reconnecting the project server's event stream; doubles up to `reconnectMaxMs`. */
  reconnectInitialMs: number;
  reconnectMaxMs: number;
  /** A stream silent this long is presumed wedged and reopened (OpenCode sends `server.heartbeat` every 10 s). */
  streamIdleMs: number;
}

const DEFAULT_TIMING: LivenessTiming = {
  reconnectInitialMs: 250,
  reconnectMaxMs: 5_000,
  streamIdleMs: 30_000,
};

export interface LivenessHandle {
  readonly monitor: EventMonitor;
  readonly sweeper: StaleSweeper;
  /** Give this holder's share back; the last one stops the timers and the stream. Idempotent. */
  release(): Promise<void>;
}

interface Running {
  holders: number;
  monitor: EventMonitor;
  sweeper: StaleSweeper;
  stop(): Promise<void>;
}

const running = new Map<string, Running>();

/**
 * A watch for a session's next prompt or model call by this process's monitor of `ctx`'s storage root, or undefined
 * when none runs here (`background: false`): the events then cannot tell, and the server is asked.
 */
export function watchMessage(
  ctx: TeamsContext,
  sessionId: string,
  watched: Watched,
): MessageWatch | undefined {
  return running.get(ctx.store.paths.root)?.monitor.messages.watch(sessionId, watched);
}

/** Whether liveness runs in this process for a storage root (tests). */
export function livenessRunning(storageRoot: string): boolean {
  return running.has(storageRoot);
}

function origin(url: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname === "localhost" ? "127.0.0.1" : parsed.hostname;
    return `${parsed.protocol}//${host}:${parsed.port}`;
  } catch {
    return url;
  }
}

/** In the project server's own process its events already arrive through the `event` hook. */
function isOwnServer(ctx: TeamsContext, server: OpencodeApi): boolean {
  return origin(server.baseUrl) === origin(ctx.edges.localServer.baseUrl);
}

const BACKGROUND = { background: true } as const;

/** Calls `step` every `intervalMs` until `signal` aborts, as an interval timer would, without holding the process. */
async function every(
  ctx: TeamsContext,
  intervalMs: number,
  signal: AbortSignal,
  step: () => void,
): Promise<void> {
  while (!signal.aborted) {
    await ctx.clock.sleep(intervalMs, signal, BACKGROUND);
    if (!signal.aborted) step();
  }
}

/** One sweep at a time: a sweep slower than the interval (a wedged lock, a slow server) must not pile up. */
class SweepRunner {
  private sweeping: Promise<void> | undefined;
  private watching = false;

  constructor(
    private readonly ctx: TeamsContext,
    private readonly sweeper: StaleSweeper,
  ) {}

  tick(): void {
    if (this.sweeping) return;
    this.sweeping = this.sweeper
      .sweep()
      .then(() => enforceTimeouts(this.ctx))
      .then(() => undefined)
      .catch((error: unknown) => {
        this.ctx.log("error", "stale sweep failed", {
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        });
      })
      .finally(() => {
        this.sweeping = undefined;
      });
  }

  /** A closed pane is known within about a second rather than at the next sweep; the sweep stays the safety net. */
  watchPanes(): void {
    if (this.watching || this.sweeping) return;
    this.watching = true;
    this.sweeper
      .needsSweep()
      .then((needed) => {
        if (needed) this.tick();
      })
      .catch(() => undefined)
      .finally(() => {
        this.watching = false;
      });
  }

  settled(): Promise<void> | undefined {
    return this.sweeping;
  }
}

/**
 * Consume one connection to the project server's event stream until it ends, `signal` aborts, or it stays silent for
 * `streamIdleMs` (a wedged stream is closed so the loop reopens it). Returns whether any event was delivered.
 */
async function consumeConnection(
  ctx: TeamsContext,
  monitor: EventMonitor,
  server: OpencodeApi,
  timing: LivenessTiming,
  signal: AbortSignal,
): Promise<boolean> {
  const connection = new AbortController();
  const watchdog = new AbortController();
  const abortConnection = () => connection.abort();
  signal.addEventListener("abort", abortConnection);
  let lastEventAt = ctx.clock.now();
  void every(ctx, Math.min(timing.streamIdleMs, 5_000), watchdog.signal, () => {
    if (ctx.clock.now() - lastEventAt > timing.streamIdleMs) connection.abort();
  });
  try {
    return await monitor.consume(server, connection.signal, () => {
      lastEventAt = ctx.clock.now();
    });
  } finally {
    watchdog.abort();
    signal.removeEventListener("abort", abortConnection);
  }
}

/** Follow the project server's event stream until `signal` aborts, reconnecting with a doubling wait. */
async function followStream(
  ctx: TeamsContext,
  monitor: EventMonitor,
  timing: LivenessTiming,
  signal: AbortSignal,
): Promise<void> {
  let delay = timing.reconnectInitialMs;
  while (!signal.aborted) {
    const server = await ctx.edges.projectServer().catch(() => undefined);
    if (signal.aborted) break;
    if (server && !isOwnServer(ctx, server)) {
      if (await consumeConnection(ctx, monitor, server, timing, signal)) delay = timing.reconnectInitialMs;
    }
    await ctx.clock.sleep(delay, signal, BACKGROUND);
    delay = Math.min(delay * 2, timing.reconnectMaxMs);
  }
}

/** How often the storage is searched for the temporary files of writes (and takeovers) a crash cut short. */
const STRAY_TEMP_CHECK_MS = 60 * 60 * 1000;

/**
 * Remove the temporary files of writes and takeovers a crash cut short (TeamStore.removeStrayTemps), logging how many
 * went. Never rejects: a rejection nobody awaits would end the host process. Two searches at once only find less each.
 */
function removeStrayTemps(ctx: TeamsContext): Promise<void> {
  return ctx.store
    .removeStrayTemps(ctx.clock.now())
    .then((removed) => {
      if (removed > 0) ctx.log("info", "removed leftovers of interrupted writes and takeovers", { removed });
    })
    .catch((error: unknown) => {
      ctx.log("warn", "could not search for stray temporary files", { error: String(error) });
    });
}

function start(ctx: TeamsContext, timing: LivenessTiming): Running {
  const monitor = new EventMonitor(ctx);
  const sweeper = new StaleSweeper(ctx);
  const runner = new SweepRunner(ctx, sweeper);
  const controller = new AbortController();
  const { signal } = controller;
  // A crash leaves its temporary files behind before the next start: they are looked for at once, then hourly.
  let strays = removeStrayTemps(ctx);
  const loops = [
    every(ctx, ctx.options.sweepIntervalMs, signal, () => runner.tick()),
    every(ctx, ctx.options.paneWatchMs, signal, () => runner.watchPanes()),
    every(ctx, STRAY_TEMP_CHECK_MS, signal, () => {
      strays = removeStrayTemps(ctx);
    }),
    followStream(ctx, monitor, timing, signal),
  ];
  return {
    holders: 0,
    monitor,
    sweeper,
    async stop() {
      controller.abort();
      await Promise.allSettled([...loops, runner.settled(), strays, monitor.settled()]);
    },
  };
}

/**
 * Start (or join) the liveness machinery of `ctx`'s storage root in this process. Every caller gets a handle and must
 * release it once (the plugin does so in its `dispose` hook).
 */
export function startLiveness(ctx: TeamsContext, timing: Partial<LivenessTiming> = {}): LivenessHandle {
  const key = ctx.store.paths.root;
  let entry = running.get(key);
  if (!entry) {
    entry = start(ctx, { ...DEFAULT_TIMING, ...timing });
    running.set(key, entry);
    ctx.log("info", "liveness monitor and stale sweep started", {
      sweepIntervalMs: ctx.options.sweepIntervalMs,
      staleThresholdMs: ctx.options.staleThresholdMs,
    });
  }
  entry.holders++;
  const shared = entry;
  let released = false;
  return {
    monitor: shared.monitor,
    sweeper: shared.sweeper,
    async release() {
      if (released) return;
      released = true;
      shared.holders--;
      if (shared.holders > 0 || running.get(key) !== shared) return;
      running.delete(key);
      await shared.stop();
    },
  };
}

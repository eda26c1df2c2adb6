import { setTimeout as sleep } from "node:timers/promises";
import type { OpencodeApi } from "../../edges/opencode-api.ts";
import type { TeamsContext } from "../context.ts";
import { EventMonitor } from "./monitor.ts";
import { StaleSweeper } from "./sweep.ts";
import { enforceTimeouts } from "./timeouts.ts";

/**
 * The only place with timers. OpenCode loads the plugin in several processes, and within one process once per
 * directory instance (and twice when it is configured globally and per project): the monitor and the sweep run
 * once per process and storage root, shared by every plugin instance that uses that root, and stop when the last
 * instance is disposed. Two processes running them is harmless (see sweep.ts and monitor.ts).
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

function start(ctx: TeamsContext, timing: LivenessTiming): Running {
  const monitor = new EventMonitor(ctx);
  const sweeper = new StaleSweeper(ctx);
  const controller = new AbortController();
  const { signal } = controller;

  let sweeping: Promise<void> | undefined;
  const tick = () => {
    // A sweep slower than the interval (a wedged lock, a slow server) must not pile up behind itself.
    if (sweeping) return;
    sweeping = sweeper
      .sweep()
      .then(() => enforceTimeouts(ctx))
      .then(() => undefined)
      .catch((error: unknown) => {
        ctx.log("error", "stale sweep failed", {
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        });
      })
      .finally(() => {
        sweeping = undefined;
      });
  };
  const interval = setInterval(tick, ctx.options.sweepIntervalMs);
  interval.unref?.();
  // A closed pane is known within about a second rather than at the next sweep; the sweep stays the safety net.
  let watching = false;
  const watch = setInterval(() => {
    if (watching || sweeping) return;
    watching = true;
    sweeper
      .needsSweep()
      .then((needed) => {
        if (needed) tick();
      })
      .catch(() => undefined)
      .finally(() => {
        watching = false;
      });
  }, ctx.options.paneWatchMs);
  watch.unref?.();

  const streamLoop = (async () => {
    let delay = timing.reconnectInitialMs;
    while (!signal.aborted) {
      const server = await ctx.edges.projectServer().catch(() => undefined);
      if (signal.aborted) break;
      if (server && !isOwnServer(ctx, server)) {
        const connection = new AbortController();
        const abortConnection = () => connection.abort();
        signal.addEventListener("abort", abortConnection);
        let lastEventAt = Date.now();
        const watchdog = setInterval(
          () => {
            if (Date.now() - lastEventAt > timing.streamIdleMs) connection.abort();
          },
          Math.min(timing.streamIdleMs, 5_000),
        );
        watchdog.unref?.();
        try {
          const delivered = await monitor.consume(server, connection.signal, () => {
            lastEventAt = Date.now();
          });
          if (delivered) delay = timing.reconnectInitialMs;
        } finally {
          clearInterval(watchdog);
          signal.removeEventListener("abort", abortConnection);
        }
      }
      try {
        await sleep(delay, undefined, { signal, ref: false });
      } catch {
        break;
      }
      delay = Math.min(delay * 2, timing.reconnectMaxMs);
    }
  })();

  return {
    holders: 0,
    monitor,
    sweeper,
    async stop() {
      clearInterval(interval);
      clearInterval(watch);
      controller.abort();
      await Promise.allSettled([streamLoop, sweeping, monitor.settled()]);
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

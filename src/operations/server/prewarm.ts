import { type ProjectServer, ServerStartError, type StartExtras } from "../../edges/server-manager.ts";
import type { TeamsContext } from "../context.ts";
import { errorText, type Failure, fail } from "../result.ts";
import { runningAgent } from "./server-control.ts";
import { runWarmupTurn, WarmupPlan } from "./warmup.ts";

// The project's `opencode serve` boots in seconds (instance, plugins, providers): started when a spawn is likely, a
// spawn finds it up or booting, and waits only for what is left. Across processes ServerManager's start lock makes
// sure one boots; within a process, the boot under way is shared here.

interface Boot {
  promise: Promise<ProjectServer>;
  /** Who started it: `prewarm (create-team)`, `spawn-agent`, ... */
  by: string;
  startedAt: number;
}

/** The boot under way per project and storage root, in this process. */
const booting = new Map<string, Boot>();

function bootKey(ctx: TeamsContext): string {
  return `${ctx.store.paths.root}\0${ctx.projectRoot}`;
}

/**
 * The project server, started if need be (ServerManager.ensureRunning). A call that comes while a boot of this process
 * is under way joins it instead of queueing on the start lock; it logs that it did (the proof that a prewarm helped).
 * Throws what ensureRunning throws.
 */
function bootProjectServer(ctx: TeamsContext, by: string, extras?: StartExtras): Promise<ProjectServer> {
  const ensure = ctx.edges.ensureProjectServer;
  if (!ensure) return Promise.reject(new Error("this process cannot start a project server"));
  const key = bootKey(ctx);
  const under = booting.get(key);
  if (under) {
    ctx.log("info", `project server: ${by} joins the boot under way`, {
      startedBy: under.by,
      sinceMs: ctx.clock.now() - under.startedAt,
    });
    return under.promise;
  }
  ctx.log("info", `project server: wanted by ${by}`);
  const promise = ensure(extras).finally(() => {
    if (booting.get(key)?.promise === promise) booting.delete(key);
  });
  booting.set(key, { promise, by, startedAt: ctx.clock.now() });
  return promise;
}

/** The project's server for spawn-agent or resume-agent; a failure in the words of specs/spawn-agent.md. */
export async function projectServerOrFail(ctx: TeamsContext, by: string): Promise<ProjectServer | Failure> {
  try {
    return await bootProjectServer(ctx, by);
  } catch (error) {
    return fail(
      error instanceof ServerStartError
        ? error.message
        : `Failed to start OpenCode server: ${errorText(error)}`,
    );
  }
}

/**
 * Start the project server in the background (unless it runs, or this process is that server); never throws. A boot
 * that fails is logged: the next spawn-agent tries again and reports why. A server this prewarm starts also gets the
 * warm-up turn (warmup.ts) unless `prewarmTurn` is off; a spawn that comes meanwhile never waits for it.
 */
export function prewarmProjectServer(ctx: TeamsContext, why: string): void {
  if (!ctx.options.prewarmServer || ctx.edges.insideProjectServer || !ctx.edges.ensureProjectServer) return;
  const startedAt = ctx.clock.now();
  const plan = ctx.options.prewarmTurn ? new WarmupPlan(ctx) : undefined;
  bootProjectServer(ctx, `prewarm (${why})`, plan)
    .then(async (server) => {
      const healthyMs = ctx.clock.now() - startedAt;
      const done = () =>
        ctx.log("info", "project server: prewarm done", {
          why,
          pid: server.info.pid,
          port: server.info.port,
          healthyMs,
          ms: ctx.clock.now() - startedAt,
          warmUpTurn: plan?.endpoint !== undefined,
        });
      // Healthy is not ready: the first request naming the project directory boots OpenCode's instance there (config,
      // plugins, this one included), which the first spawn's session would otherwise wait for. The warm-up's session
      // is that request; without it, the statuses of the directory are.
      if (plan?.endpoint) return runWarmupTurn(ctx, server, plan, done);
      await server.api.sessionStatuses([ctx.projectRoot]);
      done();
    })
    .catch((error: unknown) => {
      plan?.release();
      ctx.log("warn", "project server: prewarm failed; the next spawn-agent tries again", {
        why,
        error: errorText(error),
      });
    });
}

/** When the plugin loads: agents of this project still run, so their leader will likely spawn, resume or message. */
export async function prewarmIfAgentsRun(ctx: TeamsContext): Promise<void> {
  if (!ctx.options.prewarmServer || ctx.edges.insideProjectServer) return;
  const live = await runningAgent(ctx).catch(() => undefined);
  if (live) prewarmProjectServer(ctx, `plugin loaded; agent ${live.agent} of team ${live.teamName} runs`);
}

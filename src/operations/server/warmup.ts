// The prewarm's warm-up turn (specs/spawn-agent.md, "The cold path"): OpenCode does most of a fresh server's per-project
// work (the snapshot repository and its first `git add`, the tool registry, the system prompt, the provider SDK) only
// when a turn asks a model, and the first agent's turn used to pay it: ~1.5-2 s on the 2-core machine. Here the server
// the prewarm starts gets one provider more (warmup-config.ts) that points at a local stand-in model
// (warmup-endpoint.ts), and once it is healthy one throwaway session in the project root is prompted on it, waited for,
// and deleted. No request of it reaches a real provider: the session has a title of its own (no title model) and its
// one model is ours.

import type { ProjectServer, StartExtras } from "../../edges/server-manager.ts";
import {
  configContentWith,
  type ModelSettings,
  WARMUP_MODEL_ID,
  WARMUP_PROVIDER_ID,
  warmupProvider,
  warmupRefusal,
} from "../../edges/warmup-config.ts";
import { startWarmupEndpoint, type WarmupEndpoint } from "../../edges/warmup-endpoint.ts";
import type { TeamsContext } from "../context.ts";
import { errorText } from "../result.ts";

/** The warm-up session's title: not OpenCode's default (which would ask a small model for one), nor an agent's. */
export const WARMUP_SESSION_TITLE = "opencode-teams warm-up (deleted when done)";
const WARMUP_PROMPT = "Reply with the single word: ok";
/** How long the user's config may take to answer before the server is started without the provider. */
const SETTINGS_WAIT_MS = 2_000;
/** The whole turn, from the session's creation to idle: a first turn took up to 19 s at load 9-13 on 2 cores. */
export const WARMUP_TURN_TIMEOUT_MS = 60_000;
const IDLE_POLL_MS = 100;

/** Warm-ups under way in this process, per project and storage root: the plugin's dispose cuts them short. */
const running = new Map<string, { abort: AbortController; done: Promise<void> }>();

function warmupKey(ctx: TeamsContext): string {
  return `${ctx.store.paths.root}\0${ctx.projectRoot}`;
}

/**
 * One prewarm's warm-up, prepared before its boot: the user's config is asked at once (in parallel with the check of a
 * running server), and only a start of the server (StartExtras) opens the endpoint and adds the provider.
 */
export class WarmupPlan implements StartExtras {
  private readonly settings: Promise<ModelSettings | Error>;
  /** Open once the server was started with our provider; the turn then runs against it. */
  endpoint: WarmupEndpoint | undefined;

  constructor(private readonly ctx: TeamsContext) {
    this.settings = ctx.edges.localServer
      .modelSettings()
      .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  }

  private skip(why: string): undefined {
    this.ctx.log("info", `prewarm warm-up turn skipped: ${why}`);
    return undefined;
  }

  async configContent(userContent: string | undefined): Promise<string | undefined> {
    const settings = await Promise.race([
      this.settings,
      Bun.sleep(SETTINGS_WAIT_MS).then(() => new Error(`no answer within ${SETTINGS_WAIT_MS} ms`)),
    ]);
    if (settings instanceof Error)
      return this.skip(`the user's config could not be read: ${settings.message}`);
    const refusal = warmupRefusal(settings);
    if (refusal) return this.skip(refusal);
    this.release();
    const endpoint = startWarmupEndpoint();
    const merged = configContentWith(userContent, WARMUP_PROVIDER_ID, warmupProvider(endpoint));
    if ("error" in merged) {
      endpoint.stop();
      return this.skip(merged.error);
    }
    this.endpoint = endpoint;
    return merged.content;
  }

  /** Stop the endpoint (the boot failed, or the turn is over). */
  release(): void {
    this.endpoint?.stop();
    this.endpoint = undefined;
  }
}

/** Resolves true when `promise` settles first, false when `signal` aborts or `ms` pass. */
async function within(promise: Promise<unknown>, ms: number, signal: AbortSignal): Promise<boolean> {
  if (ms <= 0 || signal.aborted) return false;
  const stop = Promise.withResolvers<boolean>();
  const timer = setTimeout(() => stop.resolve(false), ms);
  const onAbort = () => stop.resolve(false);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    return await Promise.race([promise.then(() => true), stop.promise]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  }
}

/** Whether the server no longer lists the session as working (idle sessions are left out of its status map). */
async function settled(server: ProjectServer, directory: string, sessionId: string): Promise<boolean> {
  const { statuses, failed } = await server.api.sessionStatuses([directory]);
  if (failed[directory] !== undefined) throw new Error(failed[directory]);
  const activity = statuses[sessionId];
  return activity === undefined || activity === "idle";
}

/**
 * The turn, against a server the plan started: session, prompt, the endpoint's answer, idle, delete; the endpoint is
 * stopped at the end whatever happened. `instanceReady` is called once the session exists (the project's OpenCode
 * instance is booted: what the prewarm reports as done). Never throws: a failure is logged.
 */
export async function runWarmupTurn(
  ctx: TeamsContext,
  server: ProjectServer,
  plan: WarmupPlan,
  instanceReady: () => void,
): Promise<void> {
  const endpoint = plan.endpoint;
  if (!endpoint) return;
  const key = warmupKey(ctx);
  const abort = new AbortController();
  const done = Promise.withResolvers<void>();
  running.set(key, { abort, done: done.promise });
  const startedAt = ctx.clock.now();
  const deadline = startedAt + WARMUP_TURN_TIMEOUT_MS;
  let sessionId: string | undefined;
  let finished = false;
  try {
    ({ id: sessionId } = await server.api.createSession({
      title: WARMUP_SESSION_TITLE,
      directory: ctx.projectRoot,
    }));
    instanceReady();
    const sessionMs = ctx.clock.now() - startedAt;
    await server.api.promptAsync(sessionId, WARMUP_PROMPT, {
      model: { providerID: WARMUP_PROVIDER_ID, modelID: WARMUP_MODEL_ID },
    });
    if (!(await within(endpoint.firstServed, deadline - ctx.clock.now(), abort.signal))) {
      throw new Error(
        abort.signal.aborted ? "cut short by the plugin's dispose" : "no model request in time",
      );
    }
    const firstRequestMs = ctx.clock.now() - startedAt;
    while (!(await settled(server, ctx.projectRoot, sessionId))) {
      if (abort.signal.aborted) throw new Error("cut short by the plugin's dispose");
      if (ctx.clock.now() >= deadline) throw new Error(`not idle within ${WARMUP_TURN_TIMEOUT_MS} ms`);
      await Bun.sleep(IDLE_POLL_MS);
    }
    finished = true;
    ctx.log("info", `prewarm warm-up turn done in ${ctx.clock.now() - startedAt} ms`, {
      sessionId,
      sessionMs,
      firstRequestMs,
      requests: endpoint.served,
      refused: endpoint.refused,
    });
  } catch (error) {
    ctx.log("warn", "prewarm warm-up turn failed (the first agent's turn pays OpenCode's first turn)", {
      error: errorText(error),
      ...(sessionId !== undefined ? { sessionId } : {}),
      requests: endpoint.served,
    });
  } finally {
    if (sessionId !== undefined) {
      const id = sessionId;
      // A turn still running is stopped first: deleted under way, it could retry against the closed endpoint.
      if (!finished) await server.api.abortSession(id).catch(() => undefined);
      await server.api.deleteSession(id).catch((error: unknown) =>
        ctx.log("warn", "prewarm warm-up session could not be deleted", {
          sessionId: id,
          error: errorText(error),
        }),
      );
    }
    plan.release();
    if (running.get(key)?.done === done.promise) running.delete(key);
    done.resolve();
  }
}

/** The plugin is going away: a warm-up under way is cut short (its session aborted and deleted, its endpoint closed). */
export async function stopWarmup(ctx: TeamsContext): Promise<void> {
  const warmup = running.get(warmupKey(ctx));
  if (!warmup) return;
  warmup.abort.abort();
  await warmup.done;
}

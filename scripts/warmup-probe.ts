/**
 * Probe (issue 42): does one throwaway turn on a second, local provider warm a fresh `opencode serve`'s first turn on
 * the user's model? Per round, a fresh hermetic server (plugin loaded, git project), healthy, one directory request
 * (as the prewarm does); then either a warm-up turn (a session prompted with the `warm` provider's model, waited idle,
 * deleted) or nothing; then a pause; then a session on the user's model (`mock`): create + prompt -> first request.
 *
 *   bun scripts/warmup-probe.ts [rounds=4] [files=0] [overlapMs=-1] [userNpm=@ai-sdk/openai-compatible]
 *
 * files: that many small source files in the project (the snapshot's first `git add` grows with it); overlapMs >= 0:
 * the user's session comes that long into the warm-up turn instead of after it (a spawn that meets it under way);
 * userNpm: the user's provider on another SDK package than the warm-up's (e.g. @ai-sdk/groq, which speaks the same
 * chat-completions protocol to the mock), to see whether the warm-up also helps a provider it did not load.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  type MockModel,
  mockProviderConfig,
  startMockModel,
  startOpencode,
  waitFor,
} from "../tests/e2e/harness/index.ts";

const rounds = Number(process.argv[2] ?? 4);
const files = Number(process.argv[3] ?? 0);
/** The user's session this many ms after the warm-up turn was prompted (concurrent case); -1: after it is done. */
const overlapMs = Number(process.argv[4] ?? -1);
/** The SDK package of the user's provider (default: the same as the warm-up's). */
const userNpm = process.argv[5] ?? "@ai-sdk/openai-compatible";

async function firstRequest(mock: MockModel, marker: string): Promise<number> {
  const found = await waitFor(() => mock.requests.find((r) => r.lastUserText.trim() === `@@say ${marker}`), {
    timeoutMs: 60_000,
    intervalMs: 5,
    message: marker,
  });
  return found.receivedAt;
}

async function round(user: MockModel, warm: MockModel, n: number, warmUp: boolean): Promise<string> {
  const base = mockProviderConfig() as { provider: Record<string, unknown> };
  const server = await startOpencode({
    mockBaseUrl: user.baseUrl,
    gitInit: true,
    config: {
      enabled_providers: ["mock", "warm"],
      provider: {
        mock: { ...(base.provider.mock as object), npm: userNpm },
        warm: {
          npm: "@ai-sdk/openai-compatible",
          name: "warm",
          options: { baseURL: warm.baseUrl, apiKey: "w" },
          models: { w: { tool_call: true, limit: { context: 100000, output: 4096 } } },
        },
      },
    },
  });
  try {
    if (files > 0) {
      const dir = path.join(server.projectDir, "src");
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < files; i++)
        writeFileSync(path.join(dir, `f${i}.ts`), `export const x${i} = ${i};\n`.repeat(20));
    }
    const t0 = Date.now();
    await server.sessionStatus();
    const dirMs = Date.now() - t0;
    let warmMs = -1;
    if (warmUp) {
      const w0 = Date.now();
      const s = await server.client.session.create({ body: { title: "warm-up" } });
      const id = s.data?.id as string;
      await server.client.session.promptAsync({
        path: { id },
        body: { model: { providerID: "warm", modelID: "w" }, parts: [{ type: "text", text: "@@say ok" }] },
      });
      const done = (async () => {
        await waitFor(() => warm.requests.length > 0, { timeoutMs: 60_000, intervalMs: 5 });
        const firstWarm = Date.now() - w0;
        await server.waitForIdle(id, { intervalMs: 20 });
        warmMs = Date.now() - w0;
        await server.client.session.delete({ path: { id } });
        warm.clearRequests();
        process.stdout.write(`  (warm-up first request ${firstWarm} ms) `);
      })();
      if (overlapMs < 0) await done;
      else {
        await Bun.sleep(overlapMs);
        done.catch(() => undefined);
      }
    }
    if (overlapMs >= 0 && warmUp) {
      const marker = `probe-${n}-overlap`;
      const s0 = Date.now();
      const id = await server.createSession(marker);
      await server.promptAsync(id, `@@say ${marker}`);
      const reached = (await firstRequest(user, marker)) - s0;
      await server.waitForIdle(id);
      return `warm-up, user session ${overlapMs} ms into it: dir ${dirMs} ms, first session -> request ${reached} ms`;
    }
    await Bun.sleep(Math.max(0, 3_000 - (Date.now() - t0)));
    const marker = `probe-${n}-${warmUp ? "w" : "c"}`;
    const s0 = Date.now();
    const id = await server.createSession(marker);
    await server.promptAsync(id, `@@say ${marker}`);
    const reached = (await firstRequest(user, marker)) - s0;
    await server.waitForIdle(id);
    // And a second session right after: the warm-server figure.
    const m2 = `${marker}-again`;
    const a0 = Date.now();
    const id2 = await server.createSession(m2);
    await server.promptAsync(id2, `@@say ${m2}`);
    const again = (await firstRequest(user, m2)) - a0;
    return `${warmUp ? "warm-up " : "none    "} dir ${dirMs} ms, warm-up turn ${warmMs} ms, first session -> request ${reached} ms, second ${again} ms`;
  } finally {
    await server.stop();
  }
}

const user = await startMockModel();
const warm = await startMockModel();
try {
  for (let n = 0; n < rounds; n++) {
    for (const warmUp of n % 2 === 0 ? [false, true] : [true, false]) {
      console.log(`round ${n + 1}: ${await round(user, warm, n, warmUp)}`);
    }
  }
} finally {
  await user.stop();
  await warm.stop();
}

/**
 * One import for e2e tests. `useOpencode()` is the usual entry point: call it at the top level of a test file (or of a
 * `describe`) and it starts one mock model + one hermetic `opencode serve` in beforeAll and stops both in afterAll.
 */
import { afterAll, beforeAll } from "bun:test";
import { type MockModel, type MockModelOptions, startMockModel } from "./mock-model.ts";
import { type OpencodeServer, type StartOpencodeOptions, startOpencode } from "./opencode-server.ts";

export * from "./mock-model.ts";
export * from "./opencode-server.ts";
export * as tmux from "./tmux.ts";

export interface UseOpencodeOptions extends Omit<StartOpencodeOptions, "mockBaseUrl"> {
  mock?: MockModelOptions;
  /** Tool ids to wait for before the tests run (loads the plugin in the project's instance). */
  waitForTools?: string[];
  /** beforeAll timeout. Default 90 s. */
  setupTimeoutMs?: number;
}

export interface OpencodeFixture {
  readonly mock: MockModel;
  readonly server: OpencodeServer;
}

export function useOpencode(opts: UseOpencodeOptions = {}): OpencodeFixture {
  let mock: MockModel | undefined;
  let server: OpencodeServer | undefined;
  const { mock: mockOpts, waitForTools, setupTimeoutMs, ...serverOpts } = opts;

  beforeAll(async () => {
    mock = await startMockModel(mockOpts);
    server = await startOpencode({ ...serverOpts, mockBaseUrl: mock.baseUrl });
    if (waitForTools && waitForTools.length > 0) await server.waitForToolIds(waitForTools);
  }, setupTimeoutMs ?? 90_000);

  afterAll(async () => {
    await server?.stop();
    await mock?.stop();
  }, 30_000);

  return {
    get mock(): MockModel {
      if (!mock) throw new Error("useOpencode: mock model not started (access it inside a test)");
      return mock;
    },
    get server(): OpencodeServer {
      if (!server) throw new Error("useOpencode: opencode server not started (access it inside a test)");
      return server;
    },
  };
}

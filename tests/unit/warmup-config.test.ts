import { describe, expect, test } from "bun:test";
import { parse } from "jsonc-parser";
import { outsideServerEnv, restoreUserConfigContent, serverEnv } from "../../src/edges/server-env.ts";
import {
  configContentWith,
  WARMUP_PROVIDER_ID,
  warmupProvider,
  warmupRefusal,
} from "../../src/edges/warmup-config.ts";

const provider = warmupProvider({ baseUrl: "http://127.0.0.1:1234/tok/v1", apiKey: "key" });

function merged(user: string | undefined): Record<string, unknown> {
  const out = configContentWith(user, WARMUP_PROVIDER_ID, provider);
  if ("error" in out) throw new Error(out.error);
  return parse(out.content) as Record<string, unknown>;
}

describe("OPENCODE_CONFIG_CONTENT for the project server", () => {
  test("without the user's own: our provider alone", () => {
    expect(merged(undefined)).toEqual({ provider: { [WARMUP_PROVIDER_ID]: provider } });
    expect(merged("  ")).toEqual({ provider: { [WARMUP_PROVIDER_ID]: provider } });
  });

  test("the user's own is kept: every key, their providers, and their comments", () => {
    const user = [
      "{",
      "  // the user's note",
      '  "model": "anthropic/claude-sonnet-4-5",',
      '  "provider": { "anthropic": { "options": { "timeout": 5 } } },',
      '  "instructions": ["NOTES.md"],',
      "}",
    ].join("\n");
    const out = configContentWith(user, WARMUP_PROVIDER_ID, provider);
    if ("error" in out) throw new Error(out.error);
    expect(out.content).toContain("// the user's note");
    expect(parse(out.content)).toEqual({
      model: "anthropic/claude-sonnet-4-5",
      provider: { anthropic: { options: { timeout: 5 } }, [WARMUP_PROVIDER_ID]: provider },
      instructions: ["NOTES.md"],
    });
  });

  test("a user's config without `provider` gets one", () => {
    expect(merged('{"share": "disabled"}')).toEqual({
      share: "disabled",
      provider: { [WARMUP_PROVIDER_ID]: provider },
    });
  });

  test("a text we cannot edit safely is refused (the server then starts with the user's own, unchanged)", () => {
    for (const bad of ['{"model": ', "[1, 2]", '"text"', '{"provider": "anthropic"}', '{"x": {env:PORT}}']) {
      expect(configContentWith(bad, WARMUP_PROVIDER_ID, provider)).toHaveProperty("error");
    }
  });

  test("serverEnv sets it only when given; the environment's own otherwise", () => {
    const auth = { source: "generated" as const, username: "opencode", password: "pw" };
    const credentials = { username: "opencode", password: "pw" };
    const env = { OPENCODE_CONFIG_CONTENT: '{"share":"disabled"}', PATH: "/bin" };
    expect(serverEnv(env, auth, credentials, {}).OPENCODE_CONFIG_CONTENT).toBe('{"share":"disabled"}');
    expect(serverEnv(env, auth, credentials, {}, "merged").OPENCODE_CONFIG_CONTENT).toBe("merged");
    expect(serverEnv({ PATH: "/bin" }, auth, credentials, {})).not.toHaveProperty("OPENCODE_CONFIG_CONTENT");
  });

  test("inside the server, the user's own comes back (or none, when they had none); ours never leaves it", () => {
    const auth = { source: "generated" as const, username: "opencode", password: "pw" };
    const credentials = { username: "opencode", password: "pw" };
    const theirs: NodeJS.ProcessEnv = serverEnv(
      { OPENCODE_CONFIG_CONTENT: "{}" },
      auth,
      credentials,
      {},
      "ours",
    );
    expect(outsideServerEnv(theirs).OPENCODE_CONFIG_CONTENT).toBe("{}");
    expect(theirs.OPENCODE_CONFIG_CONTENT).toBe("ours");
    expect(restoreUserConfigContent(theirs)).toBe(true);
    expect(theirs.OPENCODE_CONFIG_CONTENT).toBe("{}");
    expect(
      Object.keys(theirs).filter((k) => k.startsWith("OPENCODE_TEAMS_") && k.includes("CONFIG")),
    ).toEqual([]);
    expect(restoreUserConfigContent(theirs)).toBe(false);
    expect(theirs.OPENCODE_CONFIG_CONTENT).toBe("{}");

    const none: NodeJS.ProcessEnv = serverEnv({}, auth, credentials, {}, "ours");
    expect(outsideServerEnv(none)).not.toHaveProperty("OPENCODE_CONFIG_CONTENT");
    restoreUserConfigContent(none);
    expect(none).not.toHaveProperty("OPENCODE_CONFIG_CONTENT");
    // A server started without ours keeps the environment's own as it is.
    const plain: NodeJS.ProcessEnv = serverEnv({ OPENCODE_CONFIG_CONTENT: "{}" }, auth, credentials, {});
    expect(restoreUserConfigContent(plain)).toBe(false);
    expect(plain.OPENCODE_CONFIG_CONTENT).toBe("{}");
  });
});

describe("whether the warm-up provider may go into the user's server", () => {
  test("a pinned model and no filter naming it out: yes", () => {
    expect(warmupRefusal({ model: "anthropic/claude-sonnet-4-5" })).toBeUndefined();
    expect(
      warmupRefusal({
        model: "mock/m",
        enabledProviders: ["mock", WARMUP_PROVIDER_ID],
        disabledProviders: ["x"],
      }),
    ).toBeUndefined();
  });

  test("no model (the added provider could become the default), or a filter that drops it: no, with the reason", () => {
    expect(warmupRefusal({})).toMatch(/names no model/);
    expect(warmupRefusal({ model: "mock/m", enabledProviders: ["mock"] })).toMatch(/enabled_providers/);
    expect(warmupRefusal({ model: "mock/m", disabledProviders: [WARMUP_PROVIDER_ID] })).toMatch(
      /disabled_providers/,
    );
  });
});

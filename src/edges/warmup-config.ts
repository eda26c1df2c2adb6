// The warm-up provider in the project server's configuration (specs/spawn-agent.md, "The cold path"): OpenCode 1.18
// merges `OPENCODE_CONFIG_CONTENT` over every config file, so the server we start gets one provider more, pointing
// at the warm-up endpoint. A user's own OPENCODE_CONFIG_CONTENT is kept: our provider is added to its text by a
// minimal edit (comments and everything else stay), and a text we cannot edit safely leaves the warm-up out.
import { applyEdits, modify, type ParseError, parseTree, printParseErrorCode } from "jsonc-parser";

/** The provider's id: it shows in the agents' model list, under PROVIDER_NAME. */
export const WARMUP_PROVIDER_ID = "opencode-teams-warmup";
export const WARMUP_MODEL_ID = "warm-up";
/** OpenCode 1.18 cannot hide a configured model without disabling it: the name says it is not one to pick. */
export const WARMUP_PROVIDER_NAME = "opencode-teams warm-up (not a model, do not pick)";

/** The user's config facts that decide whether our provider may be added (see warmupAllowed). */
export interface ModelSettings {
  /** `model`: the server's default model. */
  model?: string;
  enabledProviders?: readonly string[];
  disabledProviders?: readonly string[];
}

/**
 * Why the warm-up provider must stay out of this user's server, or undefined when it may go in:
 * - a user's provider filter would drop it (`enabled_providers` without it, `disabled_providers` with it), and
 * - without `model`, OpenCode 1.18 takes the server's default model from the first provider named in the config's
 *   `provider` (when no recent model is recorded): with ours added, agents spawned without a model could land on it.
 */
export function warmupRefusal(settings: ModelSettings): string | undefined {
  if (settings.enabledProviders && !settings.enabledProviders.includes(WARMUP_PROVIDER_ID)) {
    return `the user's enabled_providers leaves out ${WARMUP_PROVIDER_ID}`;
  }
  if (settings.disabledProviders?.includes(WARMUP_PROVIDER_ID)) {
    return `the user's disabled_providers names ${WARMUP_PROVIDER_ID}`;
  }
  if (!settings.model) {
    return "the user's config names no model, so an added provider could become the default model";
  }
  return undefined;
}

/** The provider entry: OpenCode's bundled OpenAI-compatible SDK at the endpoint, one free model. */
export function warmupProvider(endpoint: { baseUrl: string; apiKey: string }): Record<string, unknown> {
  return {
    npm: "@ai-sdk/openai-compatible",
    name: WARMUP_PROVIDER_NAME,
    options: { baseURL: endpoint.baseUrl, apiKey: endpoint.apiKey },
    models: {
      [WARMUP_MODEL_ID]: {
        name: "not a model: opencode-teams' warm-up",
        tool_call: true,
        cost: { input: 0, output: 0 },
        limit: { context: 128_000, output: 4_096 },
      },
    },
  };
}

/**
 * OPENCODE_CONFIG_CONTENT with `provider.<id>` set: the user's own text (JSON with comments, as OpenCode reads it)
 * edited in place, or ours alone when the user has none. An error when the user's text does not parse as an object
 * (it is then left as it is, and the caller starts the server without the provider).
 */
export function configContentWith(
  userContent: string | undefined,
  providerId: string,
  provider: Record<string, unknown>,
): { content: string } | { error: string } {
  if (userContent === undefined || userContent.trim() === "") {
    return { content: JSON.stringify({ provider: { [providerId]: provider } }) };
  }
  const errors: ParseError[] = [];
  const root = parseTree(userContent, errors, { allowTrailingComma: true });
  if (errors.length > 0 || root?.type !== "object") {
    const why = errors[0] ? printParseErrorCode(errors[0].error) : "not an object";
    return { error: `the user's OPENCODE_CONFIG_CONTENT cannot be edited (${why})` };
  }
  const providers = root.children?.find((p) => p.children?.[0]?.value === "provider")?.children?.[1];
  if (providers && providers.type !== "object") {
    return { error: "the user's OPENCODE_CONFIG_CONTENT has a `provider` that is not an object" };
  }
  const edits = modify(userContent, ["provider", providerId], provider, {
    formattingOptions: { insertSpaces: true, tabSize: 2 },
  });
  return { content: applyEdits(userContent, edits) };
}

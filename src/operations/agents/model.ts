import type { ModelRef } from "../../edges/opencode-api.ts";
import { WARMUP_PROVIDER_ID } from "../../edges/warmup-config.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { CallerError } from "../result.ts";

export interface ResolvedModel {
  /** What AgentState.model records: "provider/model", or "default" when the server's default applies. */
  model: string;
  providerId?: string;
  ref?: ModelRef;
}

/**
 * The project server lists the prewarm's stand-in provider among its models for as long as it runs, but nothing
 * answers there after the warm-up turn: an agent on it would retry a closed port, at work in appearance, for good.
 */
export function refuseWarmupModel(providerId: string, what: string): void {
  if (providerId !== WARMUP_PROVIDER_ID) return;
  throw new CallerError(
    `${what} '${providerId}/...' is opencode-teams' warm-up stand-in, not a model: nothing answers there after the project server's warm-up. Use a model of the user's config ("provider/model"), or leave it out for the default.`,
  );
}

/**
 * `model` "provider/model"; or `providerId` with `model` taken verbatim as the model id (ids such as OpenRouter's
 * contain slashes); or the team's defaultModel; or nothing, and the server's default model applies.
 */
export function resolveModel(
  input: { model?: string; providerId?: string },
  team: TeamConfig,
): ResolvedModel {
  const model = input.model?.trim() || undefined;
  const providerId = input.providerId?.trim() || undefined;
  if (providerId && model) {
    refuseWarmupModel(providerId, "providerId");
    const modelID = model.startsWith(`${providerId}/`) ? model.slice(providerId.length + 1) : model;
    return { model: `${providerId}/${modelID}`, providerId, ref: { providerID: providerId, modelID } };
  }
  if (providerId && !model) {
    throw new CallerError(
      `providerId '${providerId}' needs a model: pass model as well (e.g. "claude-sonnet-4-5")`,
    );
  }
  const ref = model ?? team.defaultModel;
  if (!ref) return { model: "default" };
  const slash = ref.indexOf("/");
  if (slash <= 0 || slash === ref.length - 1) {
    throw new CallerError(
      `Invalid model '${ref}': use "provider/model" (for example "anthropic/claude-sonnet-4-5") or pass providerId`,
    );
  }
  const providerID = ref.slice(0, slash);
  refuseWarmupModel(providerID, model ? "model" : "The team's defaultModel");
  const modelID = ref.slice(slash + 1);
  return { model: `${providerID}/${modelID}`, providerId: providerID, ref: { providerID, modelID } };
}

/** The model an agent was spawned with, as AgentState keeps it ("provider/model" with providerId, or "default"). */
export function recordedModel(agent: Pick<AgentState, "model" | "providerId">): ResolvedModel {
  const providerID = agent.providerId ?? agent.model.slice(0, Math.max(0, agent.model.indexOf("/")));
  if (!providerID || !agent.model.startsWith(`${providerID}/`)) return { model: agent.model };
  const modelID = agent.model.slice(providerID.length + 1);
  return { model: agent.model, providerId: providerID, ref: { providerID, modelID } };
}

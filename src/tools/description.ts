import { livenessTerms } from "../operations/team/identity-prompt.ts";
import type { TeamsOptions } from "../options.ts";

/**
 * A tool description with the numbers the model is told filled in from the options in force, so a project that
 * sets `staleThresholdMs` is not told the defaults. A `{name}` the template uses but no option provides is a bug in
 * the template: it throws when the tools are built, not in front of a model.
 */
export function toolDescription(template: string, options: TeamsOptions, extra: Record<string, number> = {}) {
  const terms = livenessTerms(options);
  const values: Record<string, number> = {
    heartbeatEverySeconds: terms.heartbeatEverySeconds,
    staleSeconds: terms.staleSeconds,
    graceMisses: terms.graceMisses,
    shutdownTimeoutSeconds: Math.round(options.shutdownTimeoutMs / 1000),
    maxAgents: options.maxAgents,
    ...extra,
  };
  return template.trim().replace(/\{(\w+)\}/g, (whole, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`tool description names an unknown value ${whole}`);
    return String(value);
  });
}

/** How results and notices name an agent, in one place so every message names it the same way. */

/** `Agent '<name>' (<id>)`: the name a person reads, the id a tool call needs. */
export function agentLabel(agent: { name: string; agentId: string }): string {
  return `Agent '${agent.name}' (${agent.agentId})`;
}

/** An agent id the team does not have, and where to find the right one. */
export function agentNotFound(agentId: string, teamName: string): string {
  return `Agent '${agentId}' not found in team '${teamName}': call list-agents for its agents and their ids.`;
}

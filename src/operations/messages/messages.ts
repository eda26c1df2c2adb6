import { boundText, ECHO_MAX } from "../../bounded-text.ts";
import { isoNow } from "../../clock.ts";
import { mapLimit } from "../../map-limit.ts";
import { assertTeamName, HUMAN_SENDER, isAgentId } from "../../state/paths.ts";
import type { AgentState, TeamConfig } from "../../state/schemas.ts";
import { agentLabel } from "../agents/agent-words.ts";
import { warnCaller } from "../call-warnings.ts";
import type { TeamsContext } from "../context.ts";
import { isLive } from "../liveness/heartbeat.ts";
import { CallerError, fail, type OpResult } from "../result.ts";
import { loadTeam, requireMember } from "../team/identity.ts";
import { type Delivery, deliverInboxMessage } from "./delivery.ts";
import { keepInboxBounded } from "./inbox-bound.ts";

export const MESSAGE_MAX_BYTES = 16 * 1024;
export const MESSAGES_PER_MINUTE = 30;

/** Who sends: a member of the team, established from its session, or a human at the CLI. */
export interface Sender {
  agentId: string;
  name: string;
  role: string;
  isLeader: boolean;
}

export const HUMAN: Sender = { agentId: HUMAN_SENDER, name: HUMAN_SENDER, role: "human", isLeader: true };

export interface SendMessageInput {
  teamName: string;
  to: string;
  message: string;
  wake?: boolean;
}

export interface SendMessageOutput {
  messageId: string;
  deliveries: { agentId: string; name: string; messageId: string; delivery: Delivery }[];
  warnings?: string[];
}

interface Recipient {
  agentId: string;
  name: string;
}

/** Of several records with one name (a resumed agent keeps its name), the one that is running, else the newest. */
function pickByName(agents: AgentState[]): AgentState | undefined {
  const sorted = [...agents].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  return sorted.find((agent) => agent.status !== "terminated") ?? sorted[0];
}

/** `to` resolved to the agents that get a copy; refusals are CallerErrors that say what to do instead. */
async function recipientsOf(
  ctx: TeamsContext,
  team: TeamConfig,
  sender: Sender,
  wanted: string,
): Promise<Recipient[]> {
  // Ids are stored in lower case; one quoted in upper case names the same agent (and so is refused to itself).
  const to = isAgentId(wanted) ? wanted.toLowerCase() : wanted;
  const agents = (await ctx.store.listAgentViews(team.name)).items.map((view) => view.state);
  const workers = agents.filter((agent) => agent.role !== "leader");
  if (to === "all") {
    if (!sender.isLeader)
      throw new CallerError('Only the team leader may send to "all"; name one recipient.');
    const live = workers.filter((agent) => isLive(agent.status) && agent.agentId !== sender.agentId);
    if (live.length === 0) throw new CallerError(`Team '${team.name}' has no running agents to send to.`);
    return live.map((agent) => ({ agentId: agent.agentId, name: agent.name }));
  }
  if (to === "leader" || to === team.leader) return [{ agentId: team.leader, name: "leader" }];
  const agent = isAgentId(to)
    ? workers.find((candidate) => candidate.agentId === to)
    : pickByName(workers.filter((candidate) => candidate.name === to));
  if (!agent) {
    const names = [...new Set(workers.filter((a) => a.status !== "terminated").map((a) => a.name))];
    throw new CallerError(
      `No agent '${boundText(to, ECHO_MAX)}' in team '${team.name}'. Send to "leader", "all" or one of: ${names.join(", ") || "(no running agents)"}.`,
    );
  }
  if (agent.status === "terminated") {
    throw new CallerError(
      `${agentLabel(agent)} has ended (${agent.outcome ?? "terminated"}): resume it first (resume-agent), or spawn a new agent.`,
    );
  }
  return [{ agentId: agent.agentId, name: agent.name }];
}

/** Count this send against the sender's last minute; refuses (recording nothing) past the limit. */
async function takeSendSlot(ctx: TeamsContext, team: TeamConfig, sender: Sender): Promise<void> {
  const now = ctx.clock.now();
  let refused = false;
  const damage = await ctx.store.sendLog.update(team.name, sender.agentId, (log) => {
    const recent = (log?.sentAt ?? []).filter((at) => now - Date.parse(at) < 60_000);
    refused = recent.length >= MESSAGES_PER_MINUTE;
    return refused ? undefined : { version: 1 as const, sentAt: [...recent, isoNow(ctx.clock)] };
  });
  for (const warning of damage) warnCaller(warning);
  if (refused) {
    throw new CallerError(
      `You sent ${MESSAGES_PER_MINUTE} messages in the last minute; wait before sending more (two agents answering each other in a loop?).`,
    );
  }
}

function checkText(message: string): string {
  const text = message.trim();
  if (!text) throw new CallerError("message is empty; say something");
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MESSAGE_MAX_BYTES) {
    throw new CallerError(
      `message is ${bytes} bytes; keep it under ${MESSAGE_MAX_BYTES} (put long material in a file and send its path)`,
    );
  }
  return text;
}

/** Write one copy per recipient to its inbox, then deliver each at once; a failed delivery stays for the sweep. */
export async function sendAs(
  ctx: TeamsContext,
  team: TeamConfig,
  sender: Sender,
  input: Omit<SendMessageInput, "teamName">,
): Promise<OpResult<SendMessageOutput>> {
  const text = checkText(input.message);
  const recipients = await recipientsOf(ctx, team, sender, input.to);
  if (recipients.some((recipient) => recipient.agentId === sender.agentId)) {
    return fail("You cannot send a message to yourself.");
  }
  await takeSendSlot(ctx, team, sender);
  const warnings: string[] = [];
  const deliveries = await mapLimit(recipients, 8, async (recipient) => {
    const message = await ctx.store.appendInbox({
      teamName: team.name,
      to: recipient.agentId,
      from: sender.agentId,
      fromName: sender.name,
      fromRole: sender.role,
      type: "message",
      text,
      createdAt: isoNow(ctx.clock),
      ...(input.wake === false ? { wake: false } : {}),
    });
    let delivery: Delivery = "stored";
    try {
      delivery = (await deliverInboxMessage(ctx, team, message)).delivery;
    } catch (error) {
      warnings.push(
        `Delivery to ${recipient.name} failed for now (${error instanceof Error ? error.message : String(error)}); it is kept in its inbox and retried by the sweep.`,
      );
    }
    await keepInboxBounded(ctx, team.name, recipient.agentId);
    return { agentId: recipient.agentId, name: recipient.name, messageId: message.id, delivery };
  });
  ctx.log("info", `message from ${sender.name} to ${input.to}`, {
    team: team.name,
    recipients: deliveries.length,
  });
  return {
    success: true,
    messageId: deliveries[0]?.messageId ?? "",
    deliveries,
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/** send-message: any member of the team, identified by its session. */
export async function sendMessage(
  ctx: TeamsContext,
  input: SendMessageInput,
  callerSessionId: string,
): Promise<OpResult<SendMessageOutput>> {
  assertTeamName(input.teamName);
  const team = await loadTeam(ctx, input.teamName);
  const caller = await requireMember(ctx, team, callerSessionId);
  const self = caller.isLeader ? undefined : await ctx.store.readAgent(team.name, caller.agentId);
  const sender: Sender = {
    agentId: caller.agentId,
    name: self?.kind === "ok" ? self.value.name : "leader",
    role: caller.role,
    isLeader: caller.isLeader,
  };
  return sendAs(ctx, team, sender, input);
}

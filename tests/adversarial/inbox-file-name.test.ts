/**
 * Deliveries and markings rebuilt an inbox message's path from its content. A file whose name does not match (restored
 * from a backup, copied by hand) was then marked nowhere: a notice went to the leader again on every sweep, and a
 * member's message counted as gone and never reached its recipient. Now the path that was listed is the one marked.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { rename } from "node:fs/promises";
import path from "node:path";
import { deliverPending, notifyLeader } from "../../src/operations/messages/notify.ts";
import type { TeamConfig } from "../../src/state/schemas.ts";
import { addAgent } from "../helpers/agents.ts";
import type { TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { leaderInbox, ledTeamContext } from "../helpers/team.ts";

let ctx: TestContext;
let leaderSession: FakeSession;
let team: TeamConfig;
beforeEach(async () => ({ ctx, leaderSession, team } = await ledTeamContext()));
afterEach(() => ctx.cleanup());

/** Gives the file a name that does not match its content, as a restore or a hand copy would. */
async function misname(file: string): Promise<void> {
  await rename(file, path.join(path.dirname(file), `zz-${path.basename(file)}`));
}

test("a notice whose file name does not match its content reaches the leader once", async () => {
  await notifyLeader(ctx, team, { type: "agent_inactive", text: "first" });
  expect(leaderSession.prompts).toHaveLength(1);
  ctx.clock.advance(15_000);
  const second = await ctx.store.appendInbox({
    teamName: "alpha",
    to: team.leader,
    from: "opencode-teams",
    type: "agent_inactive",
    text: "second",
    createdAt: new Date(ctx.clock.now()).toISOString(),
  });
  await misname(ctx.store.inboxMessageFile(second));
  for (let i = 0; i < 4; i++) {
    ctx.clock.advance(15_000);
    await deliverPending(ctx, team, new Set());
  }
  expect(leaderSession.prompts.map((prompt) => prompt.text.split("\n").at(-1))).toEqual(["first", "second"]);
  expect((await leaderInbox(ctx)).every((notice) => notice.deliveredAt)).toBe(true);
});

test("a message whose file name does not match its content reaches its recipient once", async () => {
  const agent = await addAgent(ctx, "alpha", { name: "w1" });
  const session = ctx.server.addSession({ id: agent.sessionId });
  const message = await ctx.store.appendInbox({
    teamName: "alpha",
    to: agent.agentId,
    from: team.leader,
    type: "message",
    text: "STEER-7",
    createdAt: new Date(ctx.clock.now()).toISOString(),
  });
  await misname(ctx.store.inboxMessageFile(message));
  for (let i = 0; i < 3; i++) await deliverPending(ctx, team, new Set());
  expect(session.prompts.filter((prompt) => prompt.text.includes("STEER-7"))).toHaveLength(1);
  const [stored] = (await ctx.store.readInbox("alpha", agent.agentId)).items;
  expect(stored?.deliveredAt).toBeDefined();
});

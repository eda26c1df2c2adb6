/**
 * A process that put a notice into the leader's session and died before marking it delivered left it undelivered in
 * the inbox, and the next sweep (in any process) sent it again: the leader read the same death twice. Now the notice
 * carries the id of the digest that took it before it is sent, and a retry looks for that id in the session first.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { deliverPending, notifyLeader } from "../../src/operations/messages/notify.ts";
import { InboxMessageSchema, type TeamConfig } from "../../src/state/schemas.ts";
import { writeJson } from "../../src/state/store.ts";
import type { TestContext } from "../helpers/context.ts";
import type { FakeSession } from "../helpers/fakes.ts";
import { leaderInbox, ledTeamContext } from "../helpers/team.ts";

let ctx: TestContext;
let leaderSession: FakeSession;
let team: TeamConfig;
beforeEach(async () => ({ ctx, leaderSession, team } = await ledTeamContext()));
afterEach(() => ctx.cleanup());

test("a notice in the leader's session but not marked delivered is not sent again by later sweeps", async () => {
  await notifyLeader(ctx, team, { type: "agent_inactive", text: "Agent w1 (x) became inactive: pane gone." });
  expect(leaderSession.prompts).toHaveLength(1);
  // The process died between the send and the mark: the file is as it was just before the mark.
  const [notice] = await leaderInbox(ctx);
  if (!notice) throw new Error("no notice");
  const { deliveredAt: _, file, ...unmarked } = notice;
  // Before its mark a notice is in the inbox's own directory (the mark moves it into delivered/).
  await rm(file);
  await writeJson(ctx.store.inboxMessageFile(unmarked), InboxMessageSchema, unmarked);

  ctx.clock.advance(15_000);
  // Two sweepers (two processes) retry at once, then once more.
  await Promise.all([deliverPending(ctx, team, new Set()), deliverPending(ctx, team, new Set())]);
  await deliverPending(ctx, team, new Set());
  expect(leaderSession.prompts).toHaveLength(1);
  expect((await leaderInbox(ctx))[0]?.deliveredAt).toBeDefined();
});

import { afterEach, beforeEach, expect, test } from "bun:test";
import { allocateColor, COLOR_PALETTE, releaseColor } from "../../src/operations/agents/color-pool.ts";
import { spawnAgent } from "../../src/operations/agents/spawn.ts";
import {
  agentSessionTitle,
  identitySystemTransform,
  parseAgentSessionTitle,
} from "../../src/operations/team/identity-prompt.ts";
import { createTeam } from "../../src/operations/team/team.ts";
import { substituteSystemValues } from "../e2e/harness/mock-model.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";

const LEADER = "ses_leader";
let ctx: TestContext;
let leaderId: string;

beforeEach(async () => {
  ctx = await makeTestContext({ promptRetryDelayMs: 0 });
  const team = await createTeam(ctx, { teamName: "alpha" }, LEADER);
  if (!team.success) throw new Error(team.error);
  leaderId = team.leaderAgentId;
});

afterEach(() => ctx.cleanup());

/** The hook as OpenCode calls it; titles come from the fake server, and lookups are counted. */
function hook() {
  let lookups = 0;
  const { transform, learn } = identitySystemTransform(ctx, async (sessionId) => {
    lookups++;
    return ctx.server.sessions.get(sessionId)?.title ?? ctx.local.sessions.get(sessionId)?.title;
  });
  return {
    lookups: () => lookups,
    learn,
    async system(sessionID: string | undefined) {
      const output = { system: ["base prompt"] };
      await transform({ sessionID }, output);
      return output.system;
    },
  };
}

test("session titles round-trip, names with :: included", () => {
  const title = agentSessionTitle("alpha", "a::b", "4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e2f");
  expect(title).toBe("teams::alpha::a::b::4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e2f");
  expect(parseAgentSessionTitle(title)).toEqual({
    teamName: "alpha",
    name: "a::b",
    agentId: "4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e2f",
  });
  expect(parseAgentSessionTitle("New session - 2026")).toBeUndefined();
  expect(parseAgentSessionTitle("teams::alpha")).toBeUndefined();
});

test("an agent's session gets its identity on every turn; the title is looked up once", async () => {
  const spawned = await spawnAgent(
    ctx,
    { teamName: "alpha", prompt: "go", name: "builder", role: "reviewer" },
    LEADER,
  );
  if (!spawned.success) throw new Error(spawned.error);
  const h = hook();
  const first = await h.system(spawned.sessionId);
  expect(first[0]).toBe("base prompt");
  const identity = first[1] ?? "";
  expect(identity).toContain("- name: builder\n");
  expect(identity).toContain(`- agentId: ${spawned.agentId}\n`);
  expect(identity).toContain("- role: reviewer\n");
  expect(identity).toContain("- teamName: alpha\n");
  expect(identity).toContain(`- leaderAgentId: ${leaderId}\n`);
  expect(substituteSystemValues("{{sys:agentId}} {{sys:teamName}}", identity)).toBe(
    `${spawned.agentId} alpha`,
  );
  expect(identity).toContain(
    `\`heartbeat\` tool with {"teamName": "alpha", "agentId": "${spawned.agentId}"}`,
  );
  expect(identity).toContain("every 30 seconds");
  expect(identity).toContain("`complete-agent`");
  expect(identity).toContain("`confirm-shutdown`");
  expect(await h.system(spawned.sessionId)).toEqual(first);
  expect(h.lookups()).toBe(1);

  // Terminated: no identity any more (the agent file is re-read every turn).
  await ctx.store.updateAgent("alpha", spawned.agentId, (s) =>
    s ? { ...s, status: "terminated" } : undefined,
  );
  expect(await h.system(spawned.sessionId)).toEqual(["base prompt"]);
});

test("other sessions get nothing, and are asked about once", async () => {
  const h = hook();
  const other = ctx.server.addSession({ title: "My own chat" });
  expect(await h.system(other.id)).toEqual(["base prompt"]);
  expect(await h.system(other.id)).toEqual(["base prompt"]);
  expect(h.lookups()).toBe(1);
  expect(await h.system(undefined)).toEqual(["base prompt"]);
  // The leader's session is the user's own: no agent identity is injected there.
  ctx.local.addSession({ id: LEADER, title: "leader chat" });
  expect(await h.system(LEADER)).toEqual(["base prompt"]);
});

test("a session's title from its creation event spares the first turn the server's answer", async () => {
  const spawned = await spawnAgent(ctx, { teamName: "alpha", prompt: "go", name: "builder" }, LEADER);
  if (!spawned.success) throw new Error(spawned.error);
  const identity = hook();
  const title = ctx.server.sessions.get(spawned.sessionId)?.title;
  identity.learn({ type: "session.created", properties: { info: { id: spawned.sessionId, title } } });
  // A session whose title names no agent is remembered as no one's, also without asking.
  identity.learn({
    type: "session.created",
    properties: { info: { id: "ses_other", title: "New session" } },
  });
  // A later rename does not take the agent's identity away.
  identity.learn({
    type: "session.updated",
    properties: { info: { id: spawned.sessionId, title: "mine now" } },
  });
  identity.learn({ type: "session.created", properties: { info: { id: 7, title: "teams::x" } } });
  expect((await identity.system(spawned.sessionId))[1]).toContain(spawned.agentId);
  expect(await identity.system("ses_other")).toEqual(["base prompt"]);
  expect(identity.lookups()).toBe(0);
});

test("when the title cannot be read, the agent files are searched instead", async () => {
  const spawned = await spawnAgent(ctx, { teamName: "alpha", prompt: "go" }, LEADER);
  if (!spawned.success) throw new Error(spawned.error);
  const { transform } = identitySystemTransform(ctx, async () => {
    throw new Error("server busy");
  });
  const output = { system: [] as string[] };
  await transform({ sessionID: spawned.sessionId }, output);
  expect(output.system[0]).toContain(spawned.agentId);
});

test("color pool: least recently used free color first; release is idempotent", async () => {
  const ids = ["4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e21", "4b0c1d9e-2f3a-4c5d-8e6f-7a8b9c0d1e22"];
  const first = await allocateColor(ctx, "alpha", ids[0] as string);
  expect(first).toEqual({ color: COLOR_PALETTE[0] });
  ctx.clock.advance(1_000);
  await releaseColor(ctx, ids[0] as string);
  await releaseColor(ctx, ids[0] as string);
  ctx.clock.advance(1_000);
  // blue was used a moment ago; a never-used color comes first.
  const second = await allocateColor(ctx, "alpha", ids[1] as string);
  expect(second.color).toBe(COLOR_PALETTE[1]);
});

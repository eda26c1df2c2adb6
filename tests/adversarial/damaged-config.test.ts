import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { rm, writeFile } from "node:fs/promises";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

// A lost team config must never hand the team to whoever asks next: the leader is kept, the name stays taken.

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
const LEADER = "ses_lead";

type Res = { success: boolean; error?: string; warnings?: string[]; leaderAgentId?: string };

let leaderId = "";
let workerId = "";

beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  leaderId =
    (await call<Res>("create-team", { teamName: "alpha", defaultModel: "mock/m1" }, LEADER)).leaderAgentId ??
    "";
  workerId = (await addAgent(ctx, "alpha", { sessionId: "ses_w", name: "builder" })).agentId;
});
afterEach(() => ctx.cleanup());

const damage: [string, () => Promise<void>][] = [
  [
    "damaged",
    async () => {
      await writeFile(ctx.store.paths.teamConfig("alpha"), "{ torn");
      // The stale sweep reads every team's config: that read moves the damaged file aside.
      expect((await ctx.store.readTeam("alpha")).kind).toBe("corrupt");
    },
  ],
  ["deleted", () => rm(ctx.store.paths.teamConfig("alpha"))],
];

describe.each(damage)("a %s config.json", (_, lose) => {
  test("an outsider cannot found the team again: create-team is refused", async () => {
    await lose();
    const taken = await call<Res>("create-team", { teamName: "alpha" }, "ses_outsider");
    expect(taken.success).toBe(false);
    expect(taken.error).toContain("Team 'alpha' already has state");
    expect(taken.error).toContain("pick another team name");
    // Still the original leader's team.
    const listed = await call<Res>("list-agents", { teamName: "alpha" }, LEADER);
    expect(listed.success).toBe(true);
    const team = await ctx.store.readTeam("alpha");
    expect(team.kind === "ok" && team.value.leaderSessionId).toBe(LEADER);
  });

  test("the config is rebuilt from the agent files, with a warning, and the leader keeps the team", async () => {
    await lose();
    const listed = await call<Res>("list-agents", { teamName: "alpha" }, LEADER);
    expect(listed.success).toBe(true);
    expect(listed.warnings?.join(" ")).toContain("its config was rebuilt from the agent files");
    const team = await ctx.store.readTeam("alpha");
    if (team.kind !== "ok") throw new Error("not rebuilt");
    expect(team.value.leader).toBe(leaderId);
    expect(team.value.leaderSessionId).toBe(LEADER);
    expect(team.value.defaultModel).toBe("mock/m1");
    expect(team.value.members.map((m) => m.agentId).sort()).toEqual([leaderId, workerId].sort());
    // The outsider gets nothing from the rebuilt team either.
    const spawned = await call<Res>(
      "spawn-agent",
      { teamName: "alpha", prompt: "x", headless: true },
      "ses_outsider",
    );
    expect(spawned).toMatchObject({ success: false, error: "Only the team leader can spawn agents" });
    // The worker is still a member.
    const made = await call<Res>("create-task", { teamName: "alpha", title: "t" }, "ses_w");
    expect(made.success).toBe(true);
  });
});

test("with no leader record left there is nothing to rebuild: a clear error, and still no new leader", async () => {
  await rm(ctx.store.paths.teamConfig("alpha"));
  await rm(ctx.store.paths.agentState("alpha", leaderId));
  const listed = await call<Res>("list-agents", { teamName: "alpha" }, LEADER);
  expect(listed.success).toBe(false);
  const taken = await call<Res>("create-team", { teamName: "alpha" }, "ses_outsider");
  expect(taken.success).toBe(false);
  expect(taken.error).toContain("already has state");
});

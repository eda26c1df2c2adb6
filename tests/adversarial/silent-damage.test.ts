import { afterEach, beforeEach, expect, test } from "bun:test";
import { existsSync, renameSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { allocateColor, releaseColor } from "../../src/operations/agents/color-pool.ts";
import { deliverPending } from "../../src/operations/messages/notify.ts";
import { addAgent } from "../helpers/agents.ts";
import { makeTestContext, type TestContext } from "../helpers/context.ts";
import { toolCaller } from "../helpers/tools.ts";

let ctx: TestContext;
let call: ReturnType<typeof toolCaller>;
let leaderAgentId: string;
beforeEach(async () => {
  ctx = await makeTestContext();
  call = toolCaller(ctx);
  ({ leaderAgentId } = await call<{ leaderAgentId: string }>("create-team", { teamName: "t" }, "ses_lead"));
});
afterEach(() => ctx.cleanup());

async function listingWarnings(): Promise<string[]> {
  return (await call<{ warnings?: string[] }>("list-agents", { teamName: "t" }, "ses_lead")).warnings ?? [];
}

test("a damaged heartbeat slot found by a background read reaches the next listing, once", async () => {
  const agent = await addAgent(ctx, "t");
  await writeFile(ctx.store.paths.heartbeatSlot("t", agent.agentId), "not a slot");
  // The sweep and the monitor read slots this way: no tool result of theirs lists warnings.
  expect((await ctx.store.readHeartbeat("t", agent.agentId)).warning).toContain("was damaged");
  const warnings = await listingWarnings();
  expect(warnings.some((w) => w.includes(`${agent.agentId}.hb was damaged`))).toBe(true);
  expect((await listingWarnings()).some((w) => w.includes(`${agent.agentId}.hb`))).toBe(false);
});

test("a damaged inbox message met by the sweep's delivery is logged and reaches the next listing", async () => {
  const inbox = ctx.store.paths.inboxDir("t", leaderAgentId);
  await mkdir(inbox, { recursive: true });
  const name = "2026-01-01T00-00-00-000Z-00000000-0000-4000-8000-000000000000.json";
  await writeFile(path.join(inbox, name), "{ damaged");
  const team = await ctx.store.readTeam("t");
  if (team.kind !== "ok") throw new Error("no team");
  await deliverPending(ctx, team.value, new Set());
  expect(ctx.logs.some((log) => log.message.includes("damaged inbox message"))).toBe(true);
  expect((await listingWarnings()).some((w) => w.includes(`${name} was damaged`))).toBe(true);
});

test("a damaged inbox message is reported by readInbox even when another reader moved it aside first", async () => {
  const inbox = ctx.store.paths.inboxDir("t", leaderAgentId);
  await mkdir(inbox, { recursive: true });
  const file = path.join(inbox, "2026-01-01T00-00-00-000Z-x.json");
  await writeFile(file, "{ damaged");
  // Another process quarantines it right after this reader read it.
  const realParse = JSON.parse;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (text === "{ damaged" && existsSync(file)) renameSync(file, `${file}.corrupt-by-another`);
    return realParse(text, reviver);
  }) as typeof JSON.parse;
  let read: Awaited<ReturnType<typeof ctx.store.readInbox>>;
  try {
    read = await ctx.store.readInbox("t", leaderAgentId);
  } finally {
    JSON.parse = realParse;
  }
  expect(read.items).toEqual([]);
  expect(read.warnings.join(" ")).toContain("2026-01-01T00-00-00-000Z-x.json was damaged");
});

test("a damaged color pool is reported by the spawn that allocates a color and by the kill that releases one", async () => {
  await writeFile(ctx.store.paths.colorPool, "{ damaged");
  const choice = await allocateColor(ctx, "t", "00000000-0000-4000-8000-000000000001");
  expect(choice.warning ?? "").toContain("color-pool.json was damaged");
  await writeFile(ctx.store.paths.colorPool, "{ damaged");
  const released = await releaseColor(ctx, "00000000-0000-4000-8000-000000000001");
  expect((released ?? []).join(" ")).toContain("color-pool.json was damaged");
});

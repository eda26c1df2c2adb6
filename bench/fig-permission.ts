import type { Event } from "@opencode-ai/sdk";
import { EventMonitor } from "../src/operations/liveness/monitor.ts";
import { notifyLeader } from "../src/operations/messages/notify.ts";
import { makeTestContext } from "../tests/helpers/context.ts";
import { leaderSession, note, seedTeam } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

/**
 * 10. Permission asked -> leader notice: a `permission.asked` event (as 1.18.33 sends it) handed to the event monitor
 * the way the plugin's `event` hook does, among 20 agents on real storage, until the notice sits in the leader's
 * session (`noReply` prompt; the fake server answers at once). Each run is a new request of another agent.
 * Floor, by turns in the same run: a plain notice sent to the leader (inbox file, delivery lock, prompt), the part no
 * event handling can skip; the rest is the monitor's locked read and write of the agent.
 */
export async function benchPermissionNotice(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 10 : 40;
  const samples: number[] = [];
  const floor: number[] = [];
  const ctx = await makeTestContext();
  try {
    const team = await seedTeam(ctx, "perm", 20);
    const leader = ctx.local.addSession({ id: leaderSession("perm") });
    const monitor = new EventMonitor(ctx);
    for (let run = 0; run < runs; run++) {
      const agent = team.agents[run % team.agents.length];
      if (!agent) throw new Error("no agent");
      const before = leader.prompts.length;
      const event = {
        type: "permission.asked",
        properties: {
          id: `per_bench_${run}`,
          sessionID: agent.sessionId,
          permission: "bash",
          patterns: [`echo run-${run}`],
          metadata: {},
          always: ["echo *"],
        },
      } as unknown as Event;
      // A quiet leader: no digest went out within the window, so the notice goes at once.
      ctx.clock.advance(ctx.options.noticeDigestMs + 1);
      const started = performance.now();
      monitor.handleEvent(event);
      while (leader.prompts.length === before) await Bun.sleep(1);
      samples.push(performance.now() - started);
      await monitor.settled();
      const read = await ctx.store.readTeam("perm");
      if (read.kind !== "ok") throw new Error("team perm unreadable");
      ctx.clock.advance(ctx.options.noticeDigestMs + 1);
      const plain = performance.now();
      await notifyLeader(ctx, read.value, { type: "notice", text: `plain notice ${run}` });
      floor.push(performance.now() - plain);
      // Answered: the next request of this agent is a new one.
      monitor.handleEvent({
        type: "permission.replied",
        properties: { sessionID: agent.sessionId, requestID: `per_bench_${run}`, reply: "once" },
      } as unknown as Event);
      await monitor.settled();
    }
  } finally {
    await ctx.cleanup();
  }
  note(`permission notice: ${runs} runs`);
  return [
    figure(
      "10",
      "permission -> leader notice",
      "ms",
      samples,
      { floor: { what: "a plain notice to the leader", samples: floor, maxRatio: 3 } },
      "permission asked -> leader notice delivered by the event hook; in-process event, real storage (agent lock, inbox file, delivery lock), fake server answering at once",
    ),
  ];
}

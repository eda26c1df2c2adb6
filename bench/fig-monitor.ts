import { EventMonitor } from "../src/operations/liveness/monitor.ts";
import { makeTestContext } from "../tests/helpers/context.ts";
import { lockedSlotWrite } from "./floors.ts";
import { note, seedTeam, timed } from "./setup.ts";
import { type Figure, figure } from "./stats.ts";

const AGENTS = 100;
const EVENTS = 50_000;
/** Event time between two consecutive events of the stream: 50,000 events span 500 s. */
const EVENT_GAP_MS = 10;

/** The events a busy agent's session produces: message and part updates, tool parts running. */
function syntheticEvent(sessionID: string, i: number): unknown {
  switch (i % 3) {
    case 0:
      return {
        type: "message.updated",
        properties: { info: { id: `msg_${i}`, sessionID, role: "assistant" } },
      };
    case 1:
      return {
        type: "message.part.updated",
        properties: { part: { id: `prt_${i}`, sessionID, type: "text", text: "…" } },
      };
    default:
      return {
        type: "message.part.updated",
        properties: {
          part: { id: `prt_${i}`, sessionID, type: "tool", tool: "bash", state: { status: "running" } },
        },
      };
  }
}

/** Events between two drains of the monitor's queue; each batch is timed beside its floor. */
const BATCH = 500;

/**
 * 5. 50,000 events about 100 working agents, fed to the monitor as the OpenCode bus would, with the clock moving 10 ms
 * per event. Every agent is active already, so no event changes a status and each write is a coalesced heartbeat.
 * Floor: the writes the monitor made (5b), as bare locked slot writes one after another (the monitor applies events
 * in order), over 100 slots; as events/s, the events over that time. The stream goes in batches of 500 events (the
 * queue drained after each, as between events on the bus), and after each batch as many floor writes as the batch
 * made are timed: both meet the same moment of the machine, and the ratio is the median of the batches' ratios.
 * Target 2x, as for the heartbeat tool (figure 1): each write is a heartbeat, and the coalesced events between them
 * should cost next to nothing.
 */
export async function benchMonitor(quick: boolean): Promise<Figure[]> {
  const runs = quick ? 2 : 5;
  const rates: number[] = [];
  const floorRates: number[] = [];
  const writes: number[] = [];
  const pairs: [number, number][] = [];
  let bound = 0;
  for (let run = 0; run < runs; run++) {
    const ctx = await makeTestContext();
    try {
      const team = await seedTeam(ctx, "mon", AGENTS);
      const monitor = new EventMonitor(ctx);
      const sessions = team.agents.map((a) => a.sessionId);
      const floorSlots = team.agents.map((a) => `${ctx.store.paths.heartbeatSlot("mon", a.agentId)}.floor`);
      // The first event per agent is written at once (the monitor does not know it yet); not part of the figure.
      for (const sessionId of sessions) monitor.handleEvent(syntheticEvent(sessionId, 0));
      await monitor.settled();
      const writesBefore = monitor.stats.writes;
      let monitorMs = 0;
      let floorMs = 0;
      for (let batch = 0; batch < EVENTS / BATCH; batch++) {
        const batchWritesBefore = monitor.stats.writes;
        const ms = await timed(async () => {
          for (let i = batch * BATCH; i < (batch + 1) * BATCH; i++) {
            ctx.clock.advance(EVENT_GAP_MS);
            monitor.handleEvent(syntheticEvent(sessions[i % AGENTS] as string, i));
          }
          await monitor.settled();
        });
        const count = monitor.stats.writes - batchWritesBefore;
        const baseMs = await timed(async () => {
          for (let i = 0; i < count; i++) await lockedSlotWrite(floorSlots[i % AGENTS] as string);
        });
        monitorMs += ms;
        floorMs += baseMs;
        if (count > 0) pairs.push([BATCH / (ms / 1000), BATCH / (baseMs / 1000)]);
      }
      if (monitor.stats.failures > 0) throw new Error(`${monitor.stats.failures} monitor failures`);
      rates.push(EVENTS / (monitorMs / 1000));
      floorRates.push(EVENTS / (floorMs / 1000));
      writes.push(monitor.stats.writes - writesBefore);
      bound = AGENTS * Math.ceil((EVENTS * EVENT_GAP_MS) / ctx.options.eventCoalesceMs);
    } finally {
      await ctx.cleanup();
    }
  }
  note(`monitor: ${runs} runs of ${EVENTS} events, each batch of ${BATCH} beside its floor`);
  return [
    figure("5a", `event monitor: ${EVENTS} events, ${AGENTS} agents`, "events/s", rates, {
      floor: {
        what: "its writes (5b) as locked slot writes in a row",
        samples: floorRates,
        higherIsBetter: true,
        maxRatio: 2,
        pairs,
      },
    }),
    figure("5b", `state writes for ${(EVENTS * EVENT_GAP_MS) / 1000} s of events`, "writes", writes, {
      absolute: { text: `<= ${bound} (1/agent/5 s)`, ok: (m) => m <= bound },
      loadFree: true,
    }),
  ];
}

import { describe, expect, test } from "bun:test";
import { figure, withLoad, zipRounds } from "../../bench/stats.ts";
import { markdownTable, WIDTH } from "../../bench/table.ts";

describe("bench figures against their floors", () => {
  test("a time is judged by figure / floor, a rate by floor / figure", () => {
    const time = figure("1", "t", "ms", [3, 4, 5], { floor: { what: "f", samples: [2, 2, 2], maxRatio: 2 } });
    expect(time.ratio).toBe(2);
    expect(time.met).toBe(true);
    const rate = figure("4a", "r", "1/s", [100, 100], {
      floor: { what: "f", samples: [300, 300], higherIsBetter: true, maxRatio: 2 },
    });
    expect(rate.ratio).toBe(3);
    expect(rate.met).toBe(false);
  });

  test("with round pairs, the ratio is the median of the pairs' ratios, so a slow spell that hit both cancels", () => {
    // A slow spell (everything three times slower) began between the two sides of round 2 and lasted: the medians'
    // ratio says 0.67x, four of the five pairs 2x.
    const subject = [2, 2, 2, 6, 6];
    const floor = [1, 1, 3, 3, 3];
    const paired = figure("1", "t", "ms", subject, {
      floor: { what: "f", samples: floor, maxRatio: 2, pairs: zipRounds(subject, floor) },
    });
    expect(paired.ratio).toBeCloseTo(2);
    expect(paired.floor?.pairs).toBe(5);
    // The middle half of the pairs' ratios: 0.67x (the pair split by the spell) stays out of it.
    expect(paired.floor?.pairRatios).toEqual([2, 2]);
    expect(markdownTable([paired])).toContain("median of 5 paired rounds");
    const rate = figure("5a", "r", "1/s", [100], {
      floor: {
        what: "f",
        samples: [300],
        higherIsBetter: true,
        pairs: [
          [100, 300],
          [50, 150],
          [10, 20],
        ],
      },
    });
    expect(rate.ratio).toBe(3);
    // Rounds only one side has are left out.
    expect(zipRounds([1, undefined, 3], [2, 5])).toEqual([[1, 2]]);
  });

  test("a busy machine makes wall-clock figures noisy, not judged; counts are judged anyway", () => {
    const time = figure("1", "t", "ms", [5], { floor: { what: "f", samples: [1], maxRatio: 2 } });
    const count = figure("4b", "c", "count", [0], {
      absolute: { text: "0", ok: (m) => m === 0 },
      loadFree: true,
    });
    const [noisy, judged] = withLoad([time, count], { before: 3.5, after: 1 }, 1, 2);
    expect(noisy?.noisy).toBe(true);
    expect(noisy?.met).toBeUndefined();
    expect(judged?.met).toBe(true);
    // Five busy processes of its own may take the load after it to five on two cores.
    const [own] = withLoad([time], { before: 0.5, after: 5.5 }, 5, 2);
    expect(own?.noisy).toBeUndefined();
    expect(own?.met).toBe(false);
  });

  test("the table's columns line up, so the README the bench writes stays formatted", () => {
    const table = markdownTable(
      withLoad(
        [
          figure("1", "heartbeat", "ms", [0.5], {
            floor: {
              what: "locked write",
              samples: [0.25],
              maxRatio: 2,
              also: { what: "bare", samples: [0.1] },
            },
          }),
          figure("4b", "lost updates", "count", [0], { absolute: { text: "0", ok: (m) => m === 0 } }),
        ],
        { before: 0.2, after: 0.4 },
        1,
        2,
      ).map((f) => ({ ...f, fileCreateUs: 24.4 })),
    );
    const [rows = "", notes = ""] = table.split("\n\n");
    const lines = rows.split("\n");
    expect(new Set(lines.map((l) => l.length)).size).toBe(1);
    expect(lines[2]).toContain("2.00x");
    expect(lines[2]).toContain("0.250 ms");
    // What the row has no room for is in the figure's note under the table.
    expect(notes).toContain("Floor: locked write; bare: 0.100 ms");
    expect(notes).toContain("Load 0.2 -> 0.4, file create 24 us");
  });

  test("the table stays within 120 columns: long names are cut and told in full in the note", () => {
    const long =
      "spawn-agent, warm server, call -> active, back to back (16 teams of 5 agents, each spawned as the last one boots)";
    const table = markdownTable([
      figure("6a", long, "events/s", [12178.4], {
        floor: {
          what: "a long floor ".repeat(30),
          samples: [13657],
          higherIsBetter: true,
          maxRatio: 2,
          pairs: [[1, 2]],
        },
      }),
      figure("5b", "state writes", "writes", [10000], {
        absolute: { text: "<= 10000 (1/agent/5 s)", ok: () => true },
      }),
    ]);
    for (const line of table.split("\n")) expect(line.length).toBeLessThanOrEqual(WIDTH);
    const [rows = "", notes = ""] = table.split("\n\n");
    expect(rows).toContain("…");
    expect(rows).toContain("| <= 10000 ");
    expect(notes.replaceAll("\n  ", " ")).toContain(long);
    expect(notes).toContain("Target (1/agent/5 s)");
  });
});

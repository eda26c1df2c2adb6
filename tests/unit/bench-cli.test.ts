import { describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs, usage } from "../../bench/cli.ts";
import { appendRun, earlierRatios } from "../../bench/history.ts";
import { figure } from "../../bench/stats.ts";

const IDS = ["1", "2", "6", "10"];

describe("npm run bench's options", () => {
  test("no option is the short run of every group; --quick says the same; --full the long one", () => {
    expect(parseArgs([], IDS)).toEqual({
      kind: "run",
      args: { full: false, noWait: false, only: undefined },
    });
    expect(parseArgs(["--quick"], IDS)).toEqual(parseArgs([], IDS));
    expect(parseArgs(["--full"], IDS)).toMatchObject({ kind: "run", args: { full: true } });
  });

  test("--only in both spellings and both modes", () => {
    expect(parseArgs(["--only", "1,6"], IDS)).toMatchObject({ args: { only: new Set(["1", "6"]) } });
    expect(parseArgs(["--full", "--only=10"], IDS)).toMatchObject({
      args: { full: true, only: new Set(["10"]) },
    });
  });

  test("a mistyped option, an unknown group, a missing list or both modes are refused, never run", () => {
    for (const argv of [
      ["--ful"],
      ["full"],
      ["--only", "3"],
      ["--only"],
      ["--only", "--full"],
      ["--full", "--quick"],
    ])
      expect(parseArgs(argv, IDS).kind).toBe("error");
    expect(parseArgs(["--full", "--help"], IDS).kind).toBe("help");
  });

  test("the usage names every group", () => {
    const text = usage(IDS.map((id) => ({ id, what: `group ${id}` })));
    for (const id of IDS) expect(text).toContain(`group ${id}`);
    for (const line of text.split("\n")) expect(line.length).toBeLessThanOrEqual(120);
  });
});

describe("the spread between runs", () => {
  test("each figure's ratio in the last runs of the same mode, newest first; a torn line is skipped", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "oct-unit-"));
    try {
      const file = path.join(dir, "history.jsonl");
      const run = (ratio: number) => [
        figure("1", "h", "ms", [ratio], { floor: { what: "f", samples: [1] } }),
      ];
      await appendRun(file, "short", "d1", run(2));
      await appendRun(file, "full", "d2", run(9));
      await writeFile(file, '{"date":"d3","mode":"sho', { flag: "a" });
      await writeFile(file, "\n", { flag: "a" });
      await appendRun(file, "short", "d4", run(3));
      expect(await earlierRatios(file, "short")).toEqual(new Map([["1", [3, 2]]]));
      expect(await earlierRatios(path.join(dir, "none"), "short")).toEqual(new Map());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Which module shapes OpenCode (the installed version) accepts for a `file://` plugin, and how config-tuple options
 * reach it. One server loads every fixture under fixtures/shapes/; each records its initialisation to PROBE_OUT.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { useOpencode } from "./harness/index.ts";

const FIXTURES = path.join(import.meta.dir, "fixtures", "shapes");
const f = (name: string): string => pathToFileURL(path.join(FIXTURES, name)).href;

interface ProbeRecord {
  shape: string;
  options: unknown;
  directory: string;
}

describe("plugin export shapes", () => {
  const probeDir = mkdtempSync(path.join(os.tmpdir(), "oc-e2e-probe-"));
  const probeOut = path.join(probeDir, "probe.jsonl");
  const fx = useOpencode({
    plugin: false,
    extraPlugins: [
      [f("named.ts"), { o: "named" }],
      [f("default-fn.ts"), { o: "default-fn" }],
      [f("default-obj.ts"), { o: "default-obj" }],
      f("named-and-default.ts"),
      [f("extra-fn.ts"), { o: "extra-fn" }],
      [f("default-obj-extra.ts"), { o: "default-obj-extra" }],
      f("extra-exports.ts"),
      f("default-obj-noid.ts"),
    ],
    env: { PROBE_OUT: probeOut },
  });
  afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

  const records = (): ProbeRecord[] =>
    existsSync(probeOut)
      ? readFileSync(probeOut, "utf8")
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as ProbeRecord)
      : [];

  test("accepted and rejected shapes", async () => {
    const ids = await fx.server.waitForToolIds([
      "shape-named",
      "shape-default-fn",
      "shape-default-obj",
      "shape-both",
      "shape-extra-fn",
      "shape-default-obj-extra",
    ]);
    // A non-function export (without a default {id, server} object) rejects the whole module.
    expect(ids).not.toContain("shape-extra");
    // A default {server} object without `id` is rejected for a path plugin.
    expect(ids).not.toContain("shape-default-obj-noid");
    const log = fx.server.logTail(400);
    expect(log).toContain("Plugin export is not a function");
    expect(log).toContain("must export id");
  }, 60_000);

  test("tuple options arrive as the second argument; each plugin function is called once", () => {
    const dir = fx.server.projectDir;
    const byShape = new Map(
      records()
        .filter((r) => r.directory === dir)
        .map((r) => [r.shape, r]),
    );
    expect(byShape.get("named")?.options).toEqual({ o: "named" });
    expect(byShape.get("default-fn")?.options).toEqual({ o: "default-fn" });
    expect(byShape.get("default-obj")?.options).toEqual({ o: "default-obj" });
    expect(byShape.get("named-and-default")?.options).toBeNull();
    expect(records().filter((r) => r.shape === "named-and-default" && r.directory === dir)).toHaveLength(1);
  }, 10_000);

  test("legacy modules: every exported function is called as a plugin; {id, server} modules: only server", () => {
    const shapes = records().map((r) => r.shape);
    expect(shapes).toContain("extra-fn-helper-called");
    expect(shapes).not.toContain("default-obj-extra-helper-called");
  }, 10_000);

  test("a sub-directory is its own instance and initialises the plugins again", async () => {
    const sub = path.join(fx.server.projectDir, "sub");
    mkdirSync(sub, { recursive: true });
    await fx.server.waitForToolIds(["shape-named"], { directory: sub });
    expect(records().some((r) => r.shape === "named" && r.directory === sub)).toBe(true);
  }, 60_000);
});

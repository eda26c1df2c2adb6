/**
 * The shape src/README.md promises, held by a test so it does not drift back: no import circle between modules (a
 * circle makes load order matter and two modules one), and no file that needs scrolling.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const SRC = path.join(import.meta.dir, "..", "..", "src");
const MAX_LINES = 400;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** The modules of src/ each file imports (type-only imports included: they tie the modules together too). */
function importGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const targets = [...text.matchAll(/(?:import|export)[^'";]*?from\s+["'](\.[^"']+)["']/g)]
      .map((match) => path.resolve(path.dirname(file), match[1] ?? ""))
      .filter((target) => target.endsWith(".ts"));
    graph.set(file, targets);
  }
  return graph;
}

/** Every cycle's path, found by a depth-first walk that marks what is on the current path. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const trail: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    trail.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push([...trail.slice(trail.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    trail.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found.map((cycle) => cycle.map((file) => path.relative(SRC, file)));
}

test("no import circle in src/", () => {
  expect(cycles(importGraph(sourceFiles(SRC)))).toEqual([]);
});

test(`no file in src/ over ${MAX_LINES} lines`, () => {
  const long = sourceFiles(SRC)
    .map((file) => ({
      file: path.relative(SRC, file),
      lines: readFileSync(file, "utf8").split("\n").length - 1,
    }))
    .filter(({ lines }) => lines > MAX_LINES);
  expect(long).toEqual([]);
});

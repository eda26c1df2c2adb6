import { expect, test } from "bun:test";
import { terminalBlock, terminalJson, terminalLine } from "../../src/cli/terminal-text.ts";

test("terminalLine escapes every control, bidi and invisible character, tabs and newlines included", () => {
  expect(terminalLine("a\tb\nc\rd\u001b[31me\u0007\u007f\u0085\u009b")).toBe(
    "a\\tb\\nc\\rd\\x1b[31me\\x07\\x7f\\x85\\x9b",
  );
  expect(terminalLine("\u202aA\u202eB\u2066C\u2069D\u200bE\u200dF\ufeffG\u2028H\u00adI")).toBe(
    "\\u202aA\\u202eB\\u2066C\\u2069D\\u200bE\\u200dF\\ufeffG\\u2028H\\xadI",
  );
  // The tag characters: invisible copies of ASCII a model can be told to read.
  expect(terminalLine("ok\u{e0041}\u{e0042}")).toBe("ok\\u{e0041}\\u{e0042}");
  // What only looks unusual stays: accents, CJK, emoji, a no-break space.
  expect(terminalLine("café 漢字 🙂\u00a0x")).toBe("café 漢字 🙂\u00a0x");
});

test("terminalLine cuts to max characters with …, never in the middle of an escape; fast on 1 MB", () => {
  expect(terminalLine("abcdef", 6)).toBe("abcdef");
  expect(terminalLine("abcdefg", 6)).toBe("abcde…");
  // "ab\x1b" is 6 characters shown: with the … it would be 7, so the escape goes whole.
  expect(terminalLine("ab\u001bcdef", 6)).toBe("ab…");
  expect(terminalLine("ab\u001b", 6)).toBe("ab\\x1b");
  const started = performance.now();
  expect(terminalLine("\u001b".repeat(1_000_000), 60)).toHaveLength(57);
  expect(performance.now() - started).toBeLessThan(1_000);
});

test("terminalBlock keeps line breaks and tabs and escapes the rest", () => {
  expect(terminalBlock("a\n\tb\r\n\u001b]52;c;eA==\u0007")).toBe("a\n\tb\\r\n\\x1b]52;c;eA==\\x07");
});

test("terminalJson writes DEL, C1, bidi and separators as \\u escapes; the value parses back the same", () => {
  const value = { text: "x\u007f\u009b\u202e\u2028\u200b\u{e0041}\u001b\n", n: 1 };
  const json = terminalJson(value);
  expect(json).not.toMatch(/[\u007f-\u009f\u200b-\u200f\u2028-\u202e]/u);
  expect(json).toContain("\\u007f\\u009b\\u202e\\u2028\\u200b\\udb40\\udc41\\u001b\\n");
  expect(JSON.parse(json)).toEqual(value);
  expect(terminalJson(value, undefined)).not.toContain("\n");
});

import { describe, expect, test } from "bun:test";
import path from "node:path";
import { validate as isUuid, version as uuidVersion, v1 as uuidv1, v4 as uuidv4 } from "uuid";
import { resolveProjectRoot } from "../../src/project-root.ts";
import {
  assertAgentId,
  assertTeamName,
  isAgentId,
  resolveStorageRoot,
  StoragePaths,
} from "../../src/state/paths.ts";

const hostile = [
  "",
  "../evil",
  "..",
  "/etc/passwd",
  "a/b",
  "a\\b",
  "team\u0000name",
  "tab\tname",
  "new\nline",
  "x".repeat(10_000),
  "x".repeat(65),
  "-leading-dash",
  "space name",
  "ünïcode",
];

describe("names that become paths", () => {
  const label = (value: string) =>
    JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…(${value.length})` : value);
  test.each(hostile.map((name) => [label(name), name]))("team name %s is refused", (_label, name) => {
    expect(() => assertTeamName(name)).toThrow(/Invalid team name/);
  });

  test("the refusal message is bounded and shows no raw control characters", () => {
    try {
      assertTeamName(`${"y".repeat(10_000)}\u0007`);
    } catch (error) {
      const message = (error as Error).message;
      expect(message.length).toBeLessThan(200);
      expect(message).not.toContain("\u0007");
    }
  });

  test.each(["alpha", "A", "review-pr-123", "x_y", "9lives", "x".repeat(64)])(
    "team name %# is accepted",
    (name) => {
      expect(() => assertTeamName(name)).not.toThrow();
    },
  );

  test("agent ids must be UUID v4", () => {
    expect(() => assertAgentId(uuidv4())).not.toThrow();
    for (const bad of ["", "../x", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "not-a-uuid", `${uuidv4()}/..`]) {
      expect(() => assertAgentId(bad)).toThrow(/Invalid agent id/);
    }
  });

  test("isAgentId's one pattern agrees with uuid's validate() and version() === 4", () => {
    const ids = [
      ...Array.from({ length: 200 }, () => uuidv4()),
      uuidv4().toUpperCase(),
      uuidv1(),
      "00000000-0000-0000-0000-000000000000",
      "ffffffff-ffff-ffff-ffff-ffffffffffff",
      "6ba7b810-9dad-41d1-c0b4-00c04fd430c8",
      ` ${uuidv4()}`,
      `${uuidv4()}\n`,
      uuidv4().replaceAll("-", ""),
    ];
    for (const id of ids) expect(isAgentId(id)).toBe(isUuid(id) && uuidVersion(id) === 4);
  });

  test("paths are what path.join gives, and stay inside the storage root", () => {
    for (const root of ["/store", "/store/", "/a/../store", "rel/store"]) {
      const paths = new StoragePaths(root);
      const id = uuidv4();
      expect(paths.agentState("alpha", id)).toBe(path.join(root, "teams", "alpha", "agents", `${id}.json`));
      expect(paths.heartbeatSlot("alpha", id)).toBe(path.join(root, "teams", "alpha", "agents", `${id}.hb`));
      expect(paths.teamConfig("alpha")).toBe(path.join(root, "teams", "alpha", "config.json"));
    }
  });

  test("paths stay inside the storage root", () => {
    const paths = new StoragePaths("/store");
    const id = uuidv4();
    expect(paths.agentState("alpha", id)).toBe(`/store/teams/alpha/agents/${id}.json`);
    expect(() => paths.teamConfig("../../etc")).toThrow();
    expect(() => paths.agentState("alpha", "../../x")).toThrow();
  });
});

describe("storage and project roots", () => {
  test("storage defaults under the project and honours OPENCODE_TEAMS_DIR", () => {
    expect(resolveStorageRoot("/p", {})).toBe(path.join("/p", ".opencode", "opencode-teams"));
    expect(resolveStorageRoot("/p", { OPENCODE_TEAMS_DIR: "/elsewhere" })).toBe("/elsewhere");
    expect(resolveStorageRoot("/p", { OPENCODE_TEAMS_DIR: "rel" })).toBe("/p/rel");
  });

  test("the worktree is used only when it contains the directory", () => {
    expect(resolveProjectRoot({ worktree: "/repo", directory: "/repo/pkg" })).toBe("/repo");
    expect(resolveProjectRoot({ worktree: "/", directory: "/tmp/proj" }, () => false)).toBe("/tmp/proj");
    expect(resolveProjectRoot({ worktree: "/other", directory: "/tmp/proj" }, () => false)).toBe("/tmp/proj");
    expect(resolveProjectRoot({ directory: "/tmp/proj" }, () => false)).toBe("/tmp/proj");
  });

  test("outside git, a sub-directory joins the enclosing directory that already has team state", () => {
    const exists = (file: string) => file === "/tmp/proj/.opencode/opencode-teams";
    expect(resolveProjectRoot({ worktree: "/", directory: "/tmp/proj/src/deep" }, exists)).toBe("/tmp/proj");
    expect(resolveProjectRoot({ worktree: "/", directory: "/tmp/other" }, exists)).toBe("/tmp/other");
  });
});

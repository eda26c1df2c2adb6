import { createHash } from "node:crypto";
import path from "node:path";
import { boundText } from "../bounded-text.ts";
import { TEAM_NAME_PATTERN } from "./schemas.ts";

/** A caller-supplied value that cannot become part of a path. Turned into `{ success: false, error }` at the tool boundary. */
export class InvalidNameError extends Error {
  override name = "InvalidNameError";
}

/** Echo a hostile value back without control characters or unbounded length (saying how much was cut). */
export function describeValue(value: string): string {
  return JSON.stringify(boundText(value, 40));
}

export function assertTeamName(teamName: string): void {
  if (!TEAM_NAME_PATTERN.test(teamName)) {
    throw new InvalidNameError(
      `Invalid team name ${describeValue(teamName)}: use 1-64 letters, digits, '-' or '_', starting with a letter or digit.`,
    );
  }
}

/** Sender of messages a human sends from the CLI. */
export const HUMAN_SENDER = "human";

/**
 * A UUID v4 in its usual text form, either case: what uuid's validate() and version() === 4 accept together, in one
 * test (a sweep checks every name of a 1000-agent listing, and the two calls cost it 3% of its time).
 */
const AGENT_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export function isAgentId(value: string): boolean {
  return AGENT_ID_PATTERN.test(value);
}

export function assertAgentId(agentId: string): void {
  if (!isAgentId(agentId)) {
    throw new InvalidNameError(
      `Invalid agent id ${describeValue(agentId)}: agent ids are UUID v4 values as returned by spawn-agent or create-team.`,
    );
  }
}

export const DEFAULT_STORAGE_SUBDIR = path.join(".opencode", "opencode-teams");

/** Overrides the storage root; the project server we start carries it, so every plugin instance in it agrees. */
export const STORAGE_DIR_ENV = "OPENCODE_TEAMS_DIR";
/** The leader's project root, carried by the project server we start (see resolveProjectRoot). */
export const PROJECT_ROOT_ENV = "OPENCODE_TEAMS_PROJECT_ROOT";

/** `OPENCODE_TEAMS_DIR` wins; otherwise the storage lives inside the project root the plugin was given. */
export function resolveStorageRoot(projectRoot: string, env: NodeJS.ProcessEnv = process.env): string {
  const override = env[STORAGE_DIR_ENV];
  if (override && override.trim() !== "") return path.resolve(projectRoot, override);
  return path.join(projectRoot, DEFAULT_STORAGE_SUBDIR);
}

export function projectHash(projectRoot: string): string {
  return createHash("sha256").update(path.resolve(projectRoot)).digest("hex").slice(0, 16);
}

/** Every path the plugin writes, in one place, so the layout in specs/storage.md has one source. */
export class StoragePaths {
  /**
   * Built once: the paths under it are joined by plain concatenation of checked names (no '.', '/' or '..' can occur
   * in them, so path.join would change nothing): a sweep of 1000 agents asks for 2000 paths, and path.join took about
   * a sixth of its reading time.
   */
  readonly teamsDir: string;

  constructor(readonly root: string) {
    this.teamsDir = path.join(root, "teams");
  }

  get colorPool(): string {
    return path.join(this.root, "color-pool.json");
  }
  get gitignore(): string {
    return path.join(this.root, ".gitignore");
  }
  teamDir(teamName: string): string {
    assertTeamName(teamName);
    return `${this.teamsDir}${path.sep}${teamName}`;
  }
  teamConfig(teamName: string): string {
    return path.join(this.teamDir(teamName), "config.json");
  }
  agentsDir(teamName: string): string {
    return `${this.teamDir(teamName)}${path.sep}agents`;
  }
  agentState(teamName: string, agentId: string): string {
    assertAgentId(agentId);
    return this.agentFilesOf(teamName)(agentId).state;
  }
  heartbeatSlot(teamName: string, agentId: string): string {
    assertAgentId(agentId);
    return this.agentFilesOf(teamName)(agentId).slot;
  }
  /**
   * agentState and heartbeatSlot for many agents of one team (a listing of 1000): the directory is built once, and the
   * ids, which come from that directory's listing filtered by isAgentId, are not checked again.
   */
  agentFilesOf(teamName: string): (agentId: string) => { state: string; slot: string } {
    const prefix = `${this.agentsDir(teamName)}${path.sep}`;
    return (agentId) => ({ state: `${prefix}${agentId}.json`, slot: `${prefix}${agentId}.hb` });
  }
  tasks(teamName: string): string {
    return path.join(this.teamDir(teamName), "tasks.json");
  }
  /** One directory per agent that ever got a message. */
  inboxesDir(teamName: string): string {
    return path.join(this.teamDir(teamName), "inbox");
  }
  inboxDir(teamName: string, agentId: string): string {
    assertAgentId(agentId);
    return path.join(this.inboxesDir(teamName), agentId);
  }
  /** When the leader's last notice digest went out (see notice-digest). */
  noticeDigest(teamName: string): string {
    return path.join(this.teamDir(teamName), "notice-digest.json");
  }
  /** When a sender's recent messages went out (send-message's rate limit); `human` is the CLI's sender. */
  sendLog(teamName: string, sender: string): string {
    if (sender !== HUMAN_SENDER) assertAgentId(sender);
    return path.join(this.teamDir(teamName), "sent", `${sender}.json`);
  }
  history(teamName: string): string {
    return path.join(this.teamDir(teamName), "agent-history.json");
  }
  /** The file whose lock (`tmux.lock`) is held while one of the team's panes is opened. */
  paneLock(teamName: string): string {
    return path.join(this.teamDir(teamName), "tmux");
  }
  /** The file whose lock (`spare.lock`) is held while the team's spare worktree is being made (specs/worktrees.md). */
  spareLock(teamName: string): string {
    return path.join(this.teamDir(teamName), "spare");
  }
  /**
   * The file whose lock (`worktree-changes.lock`) is held while git adds, moves or removes one of the project's
   * worktrees, so two processes never change `.git/worktrees/` at once (specs/worktrees.md).
   */
  get worktreeChangeLock(): string {
    return path.join(this.root, "worktree-changes");
  }
  /** The file whose lock (`merge.lock`) is held while merge-agent merges into the leader's checkout. */
  get mergeLock(): string {
    return path.join(this.root, "merge");
  }
  /** Where agents' git worktrees go by default (the storage dir ignores itself in git). */
  get worktreesDir(): string {
    return path.join(this.root, "worktrees");
  }
  serverDir(projectRoot: string): string {
    return path.join(this.root, "servers", projectHash(projectRoot));
  }
  serverInfo(projectRoot: string): string {
    return path.join(this.serverDir(projectRoot), "server.json");
  }
  serverLog(projectRoot: string): string {
    return path.join(this.serverDir(projectRoot), "server.log");
  }
}

import type { OpencodeApi, SessionActivity, SessionStatuses } from "../../edges/opencode-api.ts";
import type { AgentState } from "../../state/schemas.ts";
import type { TeamsContext } from "../context.ts";

export interface ServerFacts {
  server: OpencodeApi | undefined;
  /** Non-idle sessions of the directories that answered. */
  statuses: Record<string, SessionActivity>;
  /** Directories whose statuses could not be read, and why: their agents' sessions are unknown, not idle. */
  unanswered: Map<string, string>;
}

/** One directory's answer: its non-idle sessions, or why it could not be asked. */
type DirectoryAnswer = { statuses: Record<string, SessionActivity> } | { error: string };

/**
 * What the project server says, read at most once per sweep and directory, and only for directories that have stale
 * agents: the server lists a session's status only under the directory it was created in (the agent's `cwd`). A
 * directory that cannot be asked (deleted, timed out) leaves only its own agents without the busy check.
 */
export class ServerFactsReader {
  private server: Promise<OpencodeApi | undefined> | undefined;
  private readonly asked = new Map<string, Promise<DirectoryAnswer>>();

  constructor(private readonly ctx: TeamsContext) {}

  async read(directories: ReadonlySet<string>): Promise<ServerFacts> {
    this.server ??= this.ctx.edges.projectServer().catch(() => undefined);
    const server = await this.server;
    if (!server) return { server, statuses: {}, unanswered: new Map() };
    const missing = [...directories].filter((directory) => !this.asked.has(directory));
    if (missing.length > 0) {
      const answers = server.sessionStatuses(missing).catch((error: unknown): SessionStatuses => {
        const why = error instanceof Error ? error.message : String(error);
        return { statuses: {}, failed: Object.fromEntries(missing.map((directory) => [directory, why])) };
      });
      for (const directory of missing) {
        this.asked.set(
          directory,
          answers.then((answer) => this.answerFor(directory, answer)),
        );
      }
    }
    const facts: ServerFacts = { server, statuses: {}, unanswered: new Map() };
    for (const directory of directories) {
      const answer = await this.asked.get(directory);
      if (!answer) continue;
      if ("error" in answer) facts.unanswered.set(directory, answer.error);
      else Object.assign(facts.statuses, answer.statuses);
    }
    return facts;
  }

  private answerFor(directory: string, { statuses, failed }: SessionStatuses): DirectoryAnswer {
    const error = failed[directory];
    if (error === undefined) return { statuses };
    this.ctx.log("warn", "stale sweep: the project's OpenCode server did not answer for a directory", {
      directory,
      error,
    });
    return { error };
  }

  /** undefined: nothing needed asking the server this sweep; false: it did not answer for some directory. */
  async reachable(): Promise<boolean | undefined> {
    if (!this.server) return undefined;
    if (!(await this.server)) return false;
    if (this.asked.size === 0) return undefined;
    const answers = await Promise.all(this.asked.values());
    return answers.every((answer) => !("error" in answer));
  }
}

/** Whether the server's status map speaks for this agent: it was running and answered for the agent's directory. */
export function statusKnown(facts: ServerFacts, agent: AgentState): boolean {
  return facts.server !== undefined && !facts.unanswered.has(agent.cwd);
}

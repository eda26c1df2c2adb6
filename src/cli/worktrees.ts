import type { TeamsContext } from "../operations/context.ts";
import { agentBranch, worktreeContents } from "../operations/worktrees/bring-home.ts";
import { exists, gitOf, leaderRepo } from "../operations/worktrees/repo.ts";
import { type Cell, type Painter, renderTable, STATUS_STYLE } from "./format.ts";
import { terminalBlock, terminalLine } from "./terminal-text.ts";

export interface WorktreeRow {
  team: string;
  agent: string;
  agentId: string;
  status: string;
  branch: string;
  /** Commits beyond the base; null when the branch is gone. */
  ahead: number | null;
  /** Uncommitted files; null when the directory is gone. */
  dirty: number | null;
  path: string;
}

/** Every agent worktree of the team (or of all teams) whose directory or branch is still there. */
export async function collectWorktrees(
  ctx: TeamsContext,
  teamName: string | undefined,
): Promise<WorktreeRow[]> {
  const teams = teamName ? [teamName] : await ctx.store.listTeamNames();
  const repo = await leaderRepo(ctx);
  const rows: WorktreeRow[] = [];
  for (const team of teams) {
    const { items } = await ctx.store.listAgentViews(team);
    for (const { state } of items) {
      const { worktree } = state;
      if (!worktree) continue;
      const tip = await gitOf(ctx).branchTip(repo, worktree.branch);
      const contents = tip ? await worktreeContents(ctx, worktree, repo, tip) : undefined;
      const dirExists = contents?.worktreeExists ?? (await exists(ctx, worktree.path));
      if (!tip && !dirExists) continue;
      rows.push({
        team,
        agent: state.name,
        agentId: state.agentId,
        status: state.status,
        branch: worktree.branch,
        ahead: contents ? contents.ahead : null,
        dirty: contents?.worktreeExists ? contents.uncommitted.length : null,
        path: worktree.path,
      });
    }
  }
  return rows;
}

export function renderWorktrees(rows: readonly WorktreeRow[], paint: Painter): string {
  if (rows.length === 0) return "No agent worktrees.";
  const table: Cell[][] = rows.map((row) => [
    { text: `${row.team}/${row.agent}` },
    { text: row.status, style: STATUS_STYLE[row.status] },
    { text: row.branch },
    { text: row.ahead === null ? "gone" : String(row.ahead) },
    {
      text: row.dirty === null ? "-" : String(row.dirty),
      ...(row.dirty ? { style: "yellow" as const } : {}),
    },
    { text: row.path },
  ]);
  return renderTable(
    ["AGENT", "STATUS", "BRANCH", "AHEAD", "DIRTY", "PATH"],
    table,
    paint,
    "opencode-teams worktrees --json",
  );
}

/** `opencode-teams diff <team> <agent>`: the agent's branch as agent-diff gives it. */
export async function collectDiff(ctx: TeamsContext, teamName: string, agentId: string) {
  const { agent, repo, tip } = await agentBranch(ctx, { teamName, agentId });
  return {
    team: teamName,
    agent: agent.name,
    agentId: agent.agentId,
    status: agent.status,
    worktree: agent.worktree,
    ...(await worktreeContents(ctx, agent.worktree, repo, tip)),
  };
}

/** Longest commit subject shown; `diff --json` has them whole. */
const SUBJECT_MAX = 100;

/** Names, subjects and file names come from the agent's branch: each is shown escaped (terminal-text.ts). */
export function renderDiff(view: Awaited<ReturnType<typeof collectDiff>>, paint: Painter): string {
  const { branch, base, path } = view.worktree;
  const subjects = view.commits.map((c) => terminalLine(c.subject, SUBJECT_MAX));
  const cut = view.commits.some((c, i) => subjects[i] !== terminalLine(c.subject));
  return [
    `${paint(terminalLine(view.agent), "bold")} (${view.status})  ${terminalLine(branch)}  base ${base.slice(0, 12)}`,
    `worktree: ${terminalLine(path)}${view.worktreeExists ? "" : " (gone)"}`,
    "",
    `${view.ahead} commit(s) ahead of base:`,
    ...view.commits.map((c, i) => `  ${paint(c.commit.slice(0, 12), "yellow")} ${subjects[i]}`),
    ...(cut
      ? [
          paint(
            `(subjects ending in … are cut: opencode-teams diff ${view.team} ${view.agentId} --json shows them whole)`,
            "gray",
          ),
        ]
      : []),
    ...(view.diffStat ? ["", terminalBlock(view.diffStat)] : []),
    "",
    view.uncommitted.length > 0
      ? paint(
          `uncommitted (not merged by merge-agent): ${view.uncommitted.map((file) => terminalLine(file)).join(", ")}`,
          "yellow",
        )
      : "nothing uncommitted",
  ].join("\n");
}

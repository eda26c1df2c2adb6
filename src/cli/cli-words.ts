/*
 * The operations answer in the words of the tools the leader calls ("pass force: true", "resume it with
 * resume-agent"). A person at the terminal cannot call a tool: the same advice, in the CLI's commands.
 */
const TOOL_TO_COMMAND: [RegExp, string][] = [
  [/\bpass force: true\b/g, "pass --force"],
  [/\bforce: true\b/g, "--force"],
  [/\bstrategy: "squash"/g, "--squash"],
  [/\bresume-agent\b/g, "`opencode-teams resume`"],
  [/\bkill-agent\b/g, "`opencode-teams kill`"],
  [/\bmerge-agent\b/g, "`opencode-teams merge`"],
  [/\bagent-diff\b/g, "`opencode-teams diff`"],
  [/\banswer-permission\b/g, "`opencode-teams approve` / `deny`"],
  [/\bsend-message\b/g, "`opencode-teams send`"],
  [/\bread-messages\b/g, "`opencode-teams inbox`"],
  [/\bagent-history\b/g, "`opencode-teams history`"],
  [/\b(?:get-agent-status|list-agents)\b/g, "`opencode-teams status`"],
];

/** An operation's message with tool advice turned into the CLI command that does the same. */
export function cliWords(message: string): string {
  return TOOL_TO_COMMAND.reduce((text, [pattern, command]) => text.replace(pattern, command), message);
}

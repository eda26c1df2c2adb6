// tmux's command language: what a value must look like to reach tmux as itself, never as a format or a separator.

/**
 * tmux expands `#{...}` and `#(...)` in the values of -c, -n, -s and -T. `##` is a literal `#`, so escaping every `#`
 * keeps a directory or name from running a command or being rewritten.
 */
export function escapeFormat(value: string): string {
  return value.replaceAll("#", "##");
}

/**
 * One argument in tmux's command language (used when a command goes through `source-file -` on stdin). Inside double
 * quotes tmux processes backslash escapes and `$VAR`, so both are escaped, and control characters are spelled out.
 */
export function quoteTmuxArg(value: string): string {
  let out = '"';
  for (const char of value) {
    switch (char) {
      case "\\":
        out += "\\\\";
        break;
      case '"':
        out += '\\"';
        break;
      case "$":
        out += "\\$";
        break;
      case "\n":
        out += "\\n";
        break;
      case "\r":
        out += "\\r";
        break;
      case "\t":
        out += "\\t";
        break;
      default: {
        const code = char.codePointAt(0) ?? 0;
        out += code < 0x20 || code === 0x7f ? `\\u${code.toString(16).padStart(4, "0")}` : char;
      }
    }
  }
  return `${out}"`;
}

/**
 * Several tmux commands as one argv, separated by ";" arguments. tmux also reads a ";" at the end of any argument as
 * a separator, so a value ending in one (a title like "fix;") has it escaped.
 */
export function commandSequence(commands: readonly (readonly string[])[]): string[] {
  return commands.flatMap((command, index) => [
    ...(index > 0 ? [";"] : []),
    ...command.map((arg) => (arg.endsWith(";") ? `${arg.slice(0, -1)}\\;` : arg)),
  ]);
}

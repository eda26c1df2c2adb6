import path from "node:path";
import type { FilesApi } from "../../edges/files-api.ts";
import type { TeamsContext } from "../context.ts";
import { CallerError } from "../result.ts";

const NAME_MAX = 64;
const PLAN_MAX = 100;

/** A short human label (an agent's name, a plan's): trimmed, 1-`max` printable characters. */
function validateLabel(what: string, value: string, max: number): string {
  const trimmed = value.trim();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
  if (trimmed === "" || trimmed.length > max || /[\u0000-\u001f\u007f]/.test(trimmed)) {
    throw new CallerError(
      `Invalid ${what} ${JSON.stringify(value.slice(0, 80))}: use 1-${max} printable characters`,
    );
  }
  return trimmed;
}

/**
 * A requested agent name, validated (1-64 printable characters). Not brackets nor a line or paragraph separator: the
 * name goes into the header of its messages, `[message from <name> (<role>) via team …]`, which it must not close or
 * break.
 */
export function agentName(value: string): string {
  const name = validateLabel("agent name", value, NAME_MAX);
  if (/[[\]\u0085\u2028\u2029]/.test(name)) {
    throw new CallerError(
      `Invalid agent name ${JSON.stringify(name)}: no "[", "]" or line separators (it heads its messages); pick another`,
    );
  }
  return name;
}

/** The name of the plan or epic an agent works under, validated (1-100 printable characters). */
export function planName(value: string): string {
  return validateLabel("plan", value, PLAN_MAX);
}

const ALLOW_HINT = "set the plugin option allowCwdOutsideProject to true to allow it";

/**
 * The agent's working directory: the project root or a directory inside it, judged on real paths so no symlink leads
 * out, and not inside a git repository nested in the project (OpenCode takes that for another project: its own
 * config, plugins and sessions). Returned under the project root as given, with no symlink below it.
 */
export async function resolveCwd(ctx: TeamsContext, cwd: string | undefined): Promise<string> {
  if (cwd === undefined || cwd.trim() === "") return ctx.projectRoot;
  const resolved = path.resolve(ctx.projectRoot, cwd);
  if ((await ctx.edges.files.kind(resolved)) !== "directory")
    throw new CallerError(`Working directory '${resolved}' does not exist`);
  if (ctx.options.allowCwdOutsideProject) return resolved;
  const { files } = ctx.edges;
  const [real, root] = await Promise.all([files.realpath(resolved), files.realpath(ctx.projectRoot)]);
  const inside = path.relative(root, real);
  if (inside === ".." || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside)) {
    throw new CallerError(
      `Working directory '${resolved}'${real === resolved ? "" : ` (really '${real}')`} is outside the project root '${root}': agents work inside the project. Pass a directory inside it, or ${ALLOW_HINT}.`,
    );
  }
  const nested = await nestedRepository(files, root, inside);
  if (nested) {
    throw new CallerError(
      `Working directory '${resolved}' is inside the git repository '${nested}', nested in the project: OpenCode treats it as a separate project (its own config, plugins and sessions), not as part of this team's. Pass a directory of this project outside it, or ${ALLOW_HINT}.`,
    );
  }
  return path.join(ctx.projectRoot, inside);
}

/** The outermost directory between `root` (excluded) and `root/inside` (included) that holds a `.git`. */
async function nestedRepository(files: FilesApi, root: string, inside: string): Promise<string | undefined> {
  let dir = root;
  for (const part of inside.split(path.sep).filter((p) => p !== "")) {
    dir = path.join(dir, part);
    if (await files.kind(path.join(dir, ".git"), { follow: false })) return dir;
  }
  return undefined;
}

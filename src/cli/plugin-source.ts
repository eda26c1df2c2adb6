// Where the project's copy of opencode-teams came from. From a registry, OpenCode can fetch the same package by name;
// from a tarball, a path or a git URL, only the project's node_modules has it, so OpenCode must load that copy.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { PACKAGE_NAME } from "./plugin-config.ts";

export type InstallSource =
  | { kind: "registry"; spec: string }
  | { kind: "local"; spec: string }
  | { kind: "absent" };

/** Specs that name no registry: a path, a tarball, a URL, a git host (`owner/repo` too), a workspace package. */
const ELSEWHERE =
  /^(file:|link:|workspace:|portal:|git\+|git:|github:|gitlab:|bitbucket:|gist:|https?:|\.{0,2}\/|~\/)|\.(tgz|tar\.gz|tar)$/i;

/** Whether a dependency spec (`^0.1.0`, `latest`, `npm:x@1`, `file:../x.tgz`, `me/repo#main`) comes from a registry. */
export function isRegistrySpec(spec: string): boolean {
  if (spec.startsWith("npm:")) return true;
  return !ELSEWHERE.test(spec) && !spec.includes("/");
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
}

/** The spec the project's package.json gives this package, in any of its dependency lists. */
function declaredSpec(projectRoot: string): string | undefined {
  const pkg = readJson(path.join(projectRoot, "package.json"));
  if (typeof pkg !== "object" || pkg === null) return undefined;
  for (const list of ["devDependencies", "dependencies", "optionalDependencies"]) {
    const deps: unknown = (pkg as Record<string, unknown>)[list];
    const spec =
      typeof deps === "object" && deps !== null ? (deps as Record<string, unknown>)[PACKAGE_NAME] : undefined;
    if (typeof spec === "string") return spec;
  }
  return undefined;
}

/** What npm's lockfile says it installed: `resolved` (a registry URL, `file:`, `git+…`), or a link to a directory. */
function lockedSpec(projectRoot: string): string | undefined {
  for (const name of ["package-lock.json", "npm-shrinkwrap.json"]) {
    const lock = readJson(path.join(projectRoot, name));
    const packages =
      typeof lock === "object" && lock !== null ? (lock as { packages?: unknown }).packages : undefined;
    if (typeof packages !== "object" || packages === null) continue;
    const entry: unknown = (packages as Record<string, unknown>)[`node_modules/${PACKAGE_NAME}`];
    if (typeof entry !== "object" || entry === null) continue;
    const { resolved, link } = entry as { resolved?: unknown; link?: unknown };
    if (link === true) return typeof resolved === "string" ? `file:${resolved}` : "file:";
    if (typeof resolved === "string") return resolved.startsWith("http") ? "registry" : resolved;
  }
  return undefined;
}

/** Where the project got this package, from its package.json, else its lockfile; `absent` when neither names it. */
export function installSource(projectRoot: string): InstallSource {
  const spec = declaredSpec(projectRoot) ?? lockedSpec(projectRoot);
  if (spec === undefined || !existsSync(projectRoot)) return { kind: "absent" };
  return isRegistrySpec(spec) ? { kind: "registry", spec } : { kind: "local", spec };
}

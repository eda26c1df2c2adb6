// Why OpenCode has no copy of a plugin configured by name, told as the cause and the fix. OpenCode 1.x installs such a
// plugin into `<cache>/opencode/packages/<spec>/` and, when the registry has no such package, leaves that folder
// empty and says nothing: "start opencode once more" would never help.
import { existsSync } from "node:fs";
import type { Check } from "./doctor-check.ts";
import { PACKAGE_NAME } from "./plugin-config.ts";
import { PLUGIN_FILE } from "./plugin-file.ts";
import { installSource } from "./plugin-source.ts";

type RegistryAnswer = "has-it" | "no-package" | "no-version" | "unreachable";

/** The registry OpenCode's install reads, as npm names it. */
function registryUrl(env: NodeJS.ProcessEnv): string {
  const url = env.npm_config_registry?.trim() || "https://registry.npmjs.org/";
  return url.endsWith("/") ? url : `${url}/`;
}

/** Whether the registry has the version `spec` names (an exact version or a dist-tag; a range counts as found). */
async function askRegistry(registry: string, spec: string): Promise<RegistryAnswer> {
  const wanted = spec.slice(PACKAGE_NAME.length + 1) || "latest";
  try {
    const res = await fetch(`${registry}${PACKAGE_NAME}`, {
      signal: AbortSignal.timeout(5_000),
      headers: { accept: "application/vnd.npm.install-v1+json, application/json" },
    });
    if (res.status === 404) return "no-package";
    if (!res.ok) return "unreachable";
    const body = (await res.json()) as {
      versions?: Record<string, unknown>;
      "dist-tags"?: Record<string, unknown>;
    };
    if (body.versions?.[wanted] || body["dist-tags"]?.[wanted]) return "has-it";
    return /^[\d.]+$/.test(wanted) || /^[a-z]+$/i.test(wanted) ? "no-version" : "has-it";
  } catch {
    return "unreachable";
  }
}

const FROM_A_TARBALL =
  "install it into this project from a clone or a tarball (in the clone: `npm pack`; here: `npm install --save-dev <path to>/opencode-teams-<version>.tgz`), then run `npx opencode-teams init` again";

/** The check for a name entry (`spec`, from `file`) whose copy is not in `installDir/node_modules`. */
export async function missingCopy(
  spec: string,
  file: string,
  installDir: string,
  projectRoot: string,
  env: NodeJS.ProcessEnv,
): Promise<Check> {
  const name = "plugin loads";
  const tried = existsSync(installDir);
  const left = tried ? `OpenCode tried to install ${spec} and left ${installDir} empty: ` : "";
  const cleanUp = tried ? `; delete ${installDir}` : "";
  const source = installSource(projectRoot);
  if (source.kind === "local") {
    return {
      name,
      level: "fail",
      detail: `${left}${file} names ${spec}, which OpenCode fetches from a registry, but this project installed ${PACKAGE_NAME} from ${source.spec}`,
      fix: `run \`npx opencode-teams init\` again: it takes that entry out and writes ${PLUGIN_FILE}, which loads the installed copy${cleanUp}; then restart opencode`,
    };
  }
  const registry = registryUrl(env);
  const answer = await askRegistry(registry, spec);
  if (answer === "no-package" || answer === "no-version") {
    const what = answer === "no-package" ? `${PACKAGE_NAME} (it is not published there)` : spec;
    return {
      name,
      level: "fail",
      detail: `${left}${registry} has no ${what}`,
      fix: `${FROM_A_TARBALL}${cleanUp}`,
    };
  }
  if (tried) {
    const why =
      answer === "unreachable" ? `${registry} could not be reached from here` : "its install failed";
    return {
      name,
      level: "fail",
      detail: `${left}${why}`,
      fix: `delete ${installDir} and restart opencode (\`opencode serve --print-logs\` shows the install error); offline, ${FROM_A_TARBALL}`,
    };
  }
  return {
    name,
    level: "warn",
    detail: `OpenCode has not installed ${spec} yet (no ${installDir})`,
    fix: "start `opencode` in this project once (it installs plugins on start), then run doctor again",
  };
}

/**
 * A tiny npm registry on 127.0.0.1 for install tests that must not reach the network.
 *
 * It serves the packages it is given as tarballs (the packed plugin) and, for every other name a client asks for, the
 * copies installed in this repository's node_modules (nested ones too, so every version the lockfile chose), packed
 * on demand. Names it does not know answer 404, which npm treats as "not found" (fatal for a dependency, skipped for
 * an optional one such as another platform's binary).
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { REPO_ROOT } from "./opencode-server.ts";

export interface LocalRegistry {
  readonly url: string;
  /** Package names asked for (packuments), in order. */
  readonly packuments: string[];
  /** Tarballs downloaded, as `name@version`. */
  readonly tarballs: string[];
  stop(): Promise<void>;
}

interface Entry {
  manifest: Record<string, unknown> & { name: string; version: string };
  tarball: string;
}

function parseManifest(text: string, where: string): Entry["manifest"] {
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== "object" || parsed === null) throw new Error(`${where}: not an object`);
  const { name, version } = parsed as { name?: unknown; version?: unknown };
  if (typeof name !== "string" || typeof version !== "string") throw new Error(`${where}: no name/version`);
  return { ...(parsed as Record<string, unknown>), name, version };
}

/** The manifest inside a packed tarball (`package/package.json`). */
function manifestOfTarball(tarball: string): Entry["manifest"] {
  const out = spawnSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" });
  if (out.status !== 0) throw new Error(`tar cannot read ${tarball}: ${out.stderr}`);
  return parseManifest(out.stdout, tarball);
}

/** Pack an installed package directory as npm would publish it (top dir `package/`, nested node_modules left out). */
function packInstalled(dir: string, into: string, fileName: string): string {
  const out = path.join(into, fileName);
  const base = path.basename(dir);
  const r = spawnSync(
    "tar",
    [
      "-czf",
      out,
      "-C",
      path.dirname(dir),
      `--exclude=${base}/node_modules`,
      "--transform",
      `s,^${base.replace(/[.]/g, "\\.")},package,`,
      base,
    ],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`tar cannot pack ${dir}: ${r.stderr}`);
  return out;
}

function integrity(bytes: Uint8Array): { shasum: string; integrity: string } {
  return {
    shasum: createHash("sha1").update(bytes).digest("hex"),
    integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
  };
}

/** Every package directory under a node_modules dir, nested copies included (other versions of the same name). */
function installedPackages(nodeModules: string, into: Map<string, Map<string, string>>): void {
  for (const entry of readdirSync(nodeModules, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const dirs = entry.name.startsWith("@")
      ? readdirSync(path.join(nodeModules, entry.name)).map((name) =>
          path.join(nodeModules, entry.name, name),
        )
      : [path.join(nodeModules, entry.name)];
    for (const dir of dirs) {
      const file = path.join(dir, "package.json");
      if (!existsSync(file)) continue;
      const { name, version } = parseManifest(readFileSync(file, "utf8"), dir);
      const versions = into.get(name) ?? new Map<string, string>();
      versions.set(version, dir);
      into.set(name, versions);
      if (existsSync(path.join(dir, "node_modules"))) installedPackages(path.join(dir, "node_modules"), into);
    }
  }
}

/** Start the registry; `tarballs` are served first, any other name comes from the repo's node_modules. */
export function startLocalRegistry(tarballs: string[]): LocalRegistry {
  const scratch = mkdtempSync(path.join(os.tmpdir(), "oct-registry-"));
  const installed = new Map<string, Map<string, string>>();
  installedPackages(path.join(REPO_ROOT, "node_modules"), installed);
  const published = new Map<string, Entry>();
  for (const tarball of tarballs) {
    const manifest = manifestOfTarball(tarball);
    published.set(manifest.name, { manifest, tarball });
  }
  const packed = new Map<string, Entry>();
  const packuments: string[] = [];
  const downloaded: string[] = [];

  /** Every version the registry has of a name. */
  const versionsOf = (name: string): Entry[] => {
    const own = published.get(name);
    if (own) return [own];
    return [...(installed.get(name) ?? new Map<string, string>()).entries()].map(([version, dir]) => {
      const key = `${name}@${version}`;
      const cached = packed.get(key);
      if (cached) return cached;
      const manifest = parseManifest(readFileSync(path.join(dir, "package.json"), "utf8"), dir);
      const entry = {
        manifest,
        tarball: packInstalled(dir, scratch, `${name.replace("/", "-")}-${version}.tgz`),
      };
      packed.set(key, entry);
      return entry;
    });
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      const tarball = /^\/(.+)\/-\/([^/]+)$/.exec(url.pathname);
      if (tarball?.[1]) {
        const file = tarball[2];
        const entry = versionsOf(decodeURIComponent(tarball[1])).find(
          (e) => path.basename(e.tarball) === file,
        );
        if (!entry) return new Response("not found", { status: 404 });
        downloaded.push(`${entry.manifest.name}@${entry.manifest.version}`);
        return new Response(Bun.file(entry.tarball), {
          headers: { "content-type": "application/octet-stream" },
        });
      }
      const name = decodeURIComponent(url.pathname.slice(1));
      packuments.push(name);
      const entries = versionsOf(name);
      if (entries.length === 0) return Response.json({ error: "not found" }, { status: 404 });
      const versions = Object.fromEntries(
        entries.map(({ manifest, tarball }) => [
          manifest.version,
          {
            ...manifest,
            dist: {
              tarball: `${url.origin}/${name}/-/${path.basename(tarball)}`,
              ...integrity(readFileSync(tarball)),
            },
          },
        ]),
      );
      // "latest" is the newest copy installed here, which satisfies whatever range asked for it.
      const latest = entries
        .map((e) => e.manifest.version)
        .sort(Bun.semver.order)
        .at(-1);
      return Response.json({ name, "dist-tags": { latest }, versions });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}/`,
    packuments,
    tarballs: downloaded,
    async stop() {
      await server.stop(true);
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/**
 * A spawn by hand, the floor of figure 6: POST /session, prompt_async and a tmux pane running `opencode attach` on the
 * session, against the project server the plugin started, with none of the plugin's bookkeeping. Used by the bench
 * process (the tmux session the floor panes live in, the 7b floor) and by the floor's own plugin (floor-plugin.ts),
 * which runs it inside the leader's OpenCode as spawn-agent runs.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { basicAuthHeaders } from "../src/edges/opencode-client.ts";
import { recordedCredentials } from "../src/edges/server-auth.ts";
import { quoteTmuxArg } from "../src/edges/tmux-syntax.ts";
import { type ServerInfo, ServerInfoSchema } from "../src/state/schemas.ts";

export interface Spawned {
  agentId: string;
  sessionId: string;
  paneId?: string;
  status: string;
}

/** The project server the plugin started, as a hand-made spawn reaches it (with the password it recorded). */
export interface Project {
  url: string;
  dir: string;
  headers: Record<string, string>;
  info: ServerInfo;
}

const SERVERS_DIR = path.join(".opencode", "opencode-teams", "servers");

/** The project server as the plugin last recorded it, if it has one. */
export function serverInfo(projectDir: string): ServerInfo | undefined {
  const dir = path.join(projectDir, SERVERS_DIR);
  try {
    const [hash] = readdirSync(dir);
    return ServerInfoSchema.parse(
      JSON.parse(readFileSync(path.join(dir, hash ?? "", "server.json"), "utf8")),
    );
  } catch {
    return undefined;
  }
}

export function projectOf(info: ServerInfo, dir: string): Project {
  const headers = basicAuthHeaders(recordedCredentials(info) ?? {});
  return { url: `http://127.0.0.1:${info.port}`, dir, headers, info };
}

/** Floor panes live in a tmux session of their own on the plugin's tmux server (same server, same environment). */
export const FLOOR_SESSION = "floor";

/** tmux on the private socket, without the $TMUX of a terminal the bench may run in. */
export function tmuxClientEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.TMUX;
  delete env.TMUX_PANE;
  return env;
}

/** One tmux client reading `line` from stdin (`source-file -`), as the plugin runs its tmux commands: not blocking. */
async function tmuxSource(
  socket: string,
  line: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn(["tmux", "-L", socket, "source-file", "-"], {
    stdin: Buffer.from(`${line}\n`),
    stdout: "pipe",
    stderr: "pipe",
    env: tmuxClientEnv(),
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { code, stdout, stderr };
}

/**
 * A floor pane in one tmux client, as the plugin opens its panes: `env` (the server's password) goes with `new-window
 * -e` through `source-file -` on stdin, never argv, and only into this pane.
 */
async function floorPane(socket: string, command: string[], env: Record<string, string>): Promise<string> {
  const line = [
    "new-window",
    ...Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]),
    "-d",
    "-t",
    `=${FLOOR_SESSION}:`,
    "-P",
    "-F",
    "#{pane_id}",
    "--",
    ...command,
  ]
    .map(quoteTmuxArg)
    .join(" ");
  const out = await tmuxSource(socket, line);
  const paneId = out.stdout.trim();
  if (out.code !== 0 || !/^%\d+$/.test(paneId)) throw new Error(`floor pane: ${out.stderr}`);
  return paneId;
}

/** The environment the plugin gives an agent's pane: the server's password, when it has one. */
function paneEnv(info: ServerInfo): Record<string, string> {
  const credentials = recordedCredentials(info);
  return credentials
    ? { OPENCODE_SERVER_PASSWORD: credentials.password, OPENCODE_SERVER_USERNAME: credentials.username }
    : {};
}

async function post(url: string, body: unknown, auth: Record<string, string>): Promise<Response> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${await response.text()}`);
  return response;
}

/** DELETE a session on the project server, as the figure and the floor of 7b both do. */
export async function deleteSession(project: Project, sessionId: string): Promise<void> {
  const query = `directory=${encodeURIComponent(project.dir)}`;
  const response = await fetch(`${project.url}/session/${sessionId}?${query}`, {
    method: "DELETE",
    headers: project.headers,
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`DELETE session: ${response.status}`);
}

/** Where and how a hand-made spawn runs: the tmux socket of the floor session and the opencode binary its pane runs. */
export interface HandSpawnPlace {
  socket: string;
  opencodeBin: string;
}

/** The three steps spawn-agent takes (session, prompt, pane), by hand; the floor session must exist (floorSession). */
export async function handSpawn(project: Project, place: HandSpawnPlace, title: string): Promise<Spawned> {
  const query = `directory=${encodeURIComponent(project.dir)}`;
  const session = await post(`${project.url}/session?${query}`, { title }, project.headers);
  const { id } = (await session.json()) as { id: string };
  await post(
    `${project.url}/session/${id}/prompt_async?${query}`,
    { parts: [{ type: "text", text: "@@say hi" }] },
    project.headers,
  );
  const paneId = await floorPane(
    place.socket,
    [place.opencodeBin, "attach", project.url, "--session", id, "--dir", project.dir],
    paneEnv(project.info),
  );
  return { agentId: title, sessionId: id, paneId, status: "active" };
}

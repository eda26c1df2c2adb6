import { afterEach, expect, test } from "bun:test";
import type { Event } from "@opencode-ai/sdk";
import { SdkOpencodeApi } from "../../src/edges/opencode-client.ts";

/** A stand-in for `GET /event` on 127.0.0.1 that sends `chunks` as given, then keeps the stream open. */
function sseServer(chunks: string[]) {
  const requests: Request[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      requests.push(request);
      const body = new ReadableStream<string>({
        async start(controller) {
          for (const chunk of chunks) {
            controller.enqueue(chunk);
            await Bun.sleep(5);
          }
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    },
  });
  return { server, requests, url: `http://127.0.0.1:${server.port}` };
}

let stop: (() => void) | undefined;
afterEach(() => stop?.());

const data = (event: object) => `data: ${JSON.stringify(event)}\n\n`;

test("events: blocks split across chunks are put together; comments and non-JSON data are skipped", async () => {
  const first = data({ type: "server.connected", properties: {} });
  const second = data({ type: "session.idle", properties: { sessionID: "ses_1" } });
  const { server, requests, url } = sseServer([
    first.slice(0, 10),
    `${first.slice(10)}: keep-alive\n\ndata: not json\n\n`,
    `${second}id: 3\ndata: {"type":"session.deleted",\ndata: "properties":{}}\n\n`,
  ]);
  stop = () => server.stop(true);
  const api = new SdkOpencodeApi(url, { directory: "/work/project", password: "pw" });
  const controller = new AbortController();
  const seen: Event[] = [];
  for await (const event of api.events(controller.signal)) {
    seen.push(event);
    if (seen.length === 3) controller.abort();
  }
  expect(seen.map((e) => e.type)).toEqual(["server.connected", "session.idle", "session.deleted"]);
  const request = requests[0] as Request;
  // The global stream: every directory's events, not only those of the project root.
  expect(new URL(request.url).pathname).toBe("/global/event");
  expect(request.headers.get("authorization")).toBe(`Basic ${Buffer.from("opencode:pw").toString("base64")}`);
});

test("events: an abort while waiting ends the stream quietly, with no unhandled rejection", async () => {
  const { server, url } = sseServer([data({ type: "server.connected", properties: {} })]);
  stop = () => server.stop(true);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  try {
    const api = new SdkOpencodeApi(url, { directory: "/p" });
    const controller = new AbortController();
    const types: string[] = [];
    const reading = (async () => {
      for await (const event of api.events(controller.signal)) types.push(event.type);
    })();
    await Bun.sleep(100);
    controller.abort();
    await reading;
    await Bun.sleep(50);
    expect(types).toEqual(["server.connected"]);
    expect(unhandled).toEqual([]);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("events: a server that refuses the stream is an error, not an empty stream", async () => {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: () => new Response("no", { status: 401 }),
  });
  stop = () => server.stop(true);
  const api = new SdkOpencodeApi(`http://127.0.0.1:${server.port}`, { directory: "/p" });
  const read = async () => {
    for await (const _ of api.events(new AbortController().signal)) break;
  };
  await expect(read()).rejects.toThrow("GET /global/event failed (HTTP 401)");
});

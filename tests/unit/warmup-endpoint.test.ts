import { afterEach, describe, expect, test } from "bun:test";
import { startWarmupEndpoint, type WarmupEndpoint } from "../../src/edges/warmup-endpoint.ts";

let endpoint: WarmupEndpoint;
afterEach(() => endpoint.stop());

const body = JSON.stringify({ model: "warm-up", stream: true, messages: [{ role: "user", content: "hi" }] });

function post(url: string, key: string | undefined, method = "POST") {
  return fetch(url, {
    method,
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    ...(method === "POST" ? { body } : {}),
  });
}

describe("the warm-up endpoint", () => {
  test("answers its own path and key with a streamed 'ok', stop, zero usage", async () => {
    endpoint = startWarmupEndpoint();
    expect(endpoint.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[\w-]{32}\/v1$/);
    const response = await post(`${endpoint.baseUrl}/chat/completions`, endpoint.apiKey);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const events = (await response.text())
      .split("\n\n")
      .filter((e) => e.startsWith("data: "))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "ok" });
    expect(chunks[1].choices[0].finish_reason).toBe("stop");
    expect(chunks[2].usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
    await endpoint.firstServed;
    expect(endpoint.served).toBe(1);
  });

  test("a request without the path token or the key is refused, and is not counted as served", async () => {
    endpoint = startWarmupEndpoint();
    const origin = new URL(endpoint.baseUrl).origin;
    const refusals = [
      post(`${origin}/v1/chat/completions`, endpoint.apiKey),
      post(`${origin}/wrong-token/v1/chat/completions`, endpoint.apiKey),
      post(`${endpoint.baseUrl}/chat/completions`, undefined),
      post(`${endpoint.baseUrl}/chat/completions`, "not-the-key"),
      post(`${endpoint.baseUrl}/chat/completions`, endpoint.apiKey, "GET"),
    ];
    for (const response of await Promise.all(refusals)) expect(response.status).toBe(404);
    expect(endpoint.served).toBe(0);
    expect(endpoint.refused).toBe(5);
  });

  test("a non-streamed request gets one completion; after stop() the port is closed", async () => {
    endpoint = startWarmupEndpoint();
    const response = await fetch(`${endpoint.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${endpoint.apiKey}` },
      body: JSON.stringify({ model: "warm-up", messages: [] }),
    });
    const json = (await response.json()) as { choices: { message: { content: string } }[] };
    expect(json.choices[0]?.message.content).toBe("ok");
    endpoint.stop();
    const after = await post(`${endpoint.baseUrl}/chat/completions`, endpoint.apiKey).then(
      () => "answered",
      () => "refused",
    );
    expect(after).toBe("refused");
  });
});

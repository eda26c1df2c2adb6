/** The mock model on its own (no OpenCode): script parsing, SSE format, title answers, errors, hang + disconnect. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  type ChatMessage,
  type MockModel,
  parseDirectives,
  promptOf,
  scriptedReply,
  startMockModel,
  substituteSystemValues,
  waitFor,
} from "./harness/index.ts";

function toolTurn(id: string, name: string, result: string): ChatMessage[] {
  return [
    {
      role: "assistant",
      content: "",
      tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }],
    },
    { role: "tool", tool_call_id: id, content: result },
  ];
}

describe("script", () => {
  const script = [
    "please do this",
    "@@sleep 50",
    '@@call a {"x":1}',
    "@@call b",
    "@@sleep 20",
    "@@say bye",
  ].join("\n");

  test("parses directives and ignores prose", () => {
    expect(parseDirectives(script)).toEqual([
      { op: "sleep", ms: 50 },
      { op: "call", tool: "a", args: { x: 1 } },
      { op: "call", tool: "b", args: {} },
      { op: "sleep", ms: 20 },
      { op: "say", text: "bye" },
    ]);
    expect(() => parseDirectives("@@call a {bad json")).toThrow(/bad JSON/);
  });

  test("next directive = tool calls since the last user message", () => {
    expect(scriptedReply({ lastUserText: script, turnMessages: [] })).toEqual({
      kind: "tool",
      name: "a",
      args: { x: 1 },
      delayMs: 50,
    });
    const one = toolTurn("c1", "a", "ra");
    expect(scriptedReply({ lastUserText: script, turnMessages: one })).toEqual({
      kind: "tool",
      name: "b",
      args: {},
      delayMs: 0,
    });
    const two = [...one, ...toolTurn("c2", "b", "rb")];
    expect(scriptedReply({ lastUserText: script, turnMessages: two })).toEqual({
      kind: "text",
      text: "bye",
      delayMs: 20,
    });
  });

  test("answers DONE <tool>: <last result> when the directives run out", () => {
    const turn = toolTurn("c1", "create-team", '{"success":true}');
    expect(scriptedReply({ lastUserText: "@@call create-team {}", turnMessages: turn })).toEqual({
      kind: "text",
      text: 'DONE create-team: {"success":true}',
      delayMs: 0,
    });
    expect(scriptedReply({ lastUserText: "hello", turnMessages: [] })).toEqual({
      kind: "text",
      text: "DONE",
      delayMs: 0,
    });
  });

  test("a plugin notice that landed after the prompt is not the prompt: the script goes on", () => {
    const notice: ChatMessage = {
      role: "user",
      content: [{ type: "text", text: "[notice from opencode-teams via team wt, id 7]\nAgent b completed." }],
    };
    const prompt: ChatMessage = { role: "user", content: script };
    // Before the first call, and between a call and the next step.
    expect(scriptedReply(promptOf([prompt, notice]))).toMatchObject({ kind: "tool", name: "a" });
    const mid = promptOf([prompt, ...toolTurn("c1", "a", "ra"), notice]);
    expect(mid.lastUserText).toBe(script);
    expect(scriptedReply(mid)).toMatchObject({ kind: "tool", name: "b" });
    // A message from a member is a prompt of its own.
    const member = "[message from w1 via team wt, id 8]\nhello";
    expect(promptOf([prompt, { role: "user", content: member }]).lastUserText).toBe(member);
  });
});

describe("http", () => {
  let mock: MockModel;
  beforeAll(async () => {
    mock = await startMockModel();
  });
  afterAll(async () => {
    await mock.stop();
  });

  const post = (body: unknown, signal?: AbortSignal): Promise<Response> =>
    fetch(`${mock.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": "ses_test" },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  const tools = [{ type: "function", function: { name: "a", parameters: { type: "object" } } }];

  test("GET /v1/models", async () => {
    const res = await fetch(`${mock.baseUrl}/models`);
    expect(await res.json()).toMatchObject({ data: [{ id: "mock-model" }] });
  });

  test("streams a tool call as SSE chunks ending in [DONE]", async () => {
    const res = await post({
      stream: true,
      tools,
      messages: [{ role: "user", content: '@@call a {"k":"v"}' }],
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    const frames = text.split("\n\n").filter((f) => f.startsWith("data: "));
    expect(frames.at(-1)).toBe("data: [DONE]");
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.slice(6)));
    const call = chunks.find((c) => c.choices[0]?.delta?.tool_calls)?.choices[0].delta.tool_calls[0];
    expect(call).toMatchObject({
      index: 0,
      type: "function",
      function: { name: "a", arguments: '{"k":"v"}' },
    });
    expect(typeof call.id).toBe("string");
    expect(chunks.some((c) => c.choices[0]?.finish_reason === "tool_calls")).toBe(true);
    const rec = mock.requests.at(-1);
    expect(rec?.sessionId).toBe("ses_test");
    expect(rec?.tools).toEqual(["a"]);
  });

  test("a request without tools gets a title", async () => {
    const text = await (
      await post({ stream: true, messages: [{ role: "user", content: "@@call a {}" }] })
    ).text();
    expect(text).toContain('"content":"Test session"');
    expect(text).toContain('"finish_reason":"stop"');
  });

  test("@@error answers with that HTTP status", async () => {
    const res = await post({
      stream: true,
      tools,
      messages: [{ role: "user", content: "@@error 400 nope" }],
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { message: "nope" } });
  });

  test("setHandler / onSession override the script", async () => {
    const off = mock.onSession("ses_test", () => ({ kind: "text", text: "from onSession" }));
    expect(
      await (await post({ stream: true, tools, messages: [{ role: "user", content: "x" }] })).text(),
    ).toContain("from onSession");
    off();
    mock.setHandler((r) =>
      r.lastUserText === "y" ? { kind: "error", status: 422, message: "handled" } : undefined,
    );
    expect((await post({ stream: true, tools, messages: [{ role: "user", content: "y" }] })).status).toBe(
      422,
    );
    mock.setHandler(null);
  });

  test("@@hang holds the request until the client disconnects", async () => {
    const ac = new AbortController();
    const res = await post(
      { stream: true, tools, messages: [{ role: "user", content: "@@hang" }] },
      ac.signal,
    );
    expect(res.status).toBe(200);
    expect(mock.inFlight).toBe(1);
    ac.abort();
    await waitFor(() => mock.inFlight === 0, { timeoutMs: 5_000 });
  });

  test("@@sleep is cut short by a disconnect", async () => {
    const ac = new AbortController();
    const pending = post(
      { stream: true, tools, messages: [{ role: "user", content: "@@sleep 60000\n@@say late" }] },
      ac.signal,
    );
    await waitFor(() => mock.inFlight === 1, { timeoutMs: 5_000 });
    ac.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => mock.inFlight === 0, { timeoutMs: 5_000 });
  });
});

test("{{sys:key}} takes the value the system prompt gives for key", () => {
  const system =
    "You are an agent of team alpha.\n- agentId: 1b4e28ba-2fa1-4d2b-9f5e-3c6a1d2e4f5a\n- teamName: `alpha`";
  expect(
    substituteSystemValues(
      '@@call heartbeat {"agentId":"{{sys:agentId}}","teamName":"{{sys:teamName}}"}',
      system,
    ),
  ).toBe('@@call heartbeat {"agentId":"1b4e28ba-2fa1-4d2b-9f5e-3c6a1d2e4f5a","teamName":"alpha"}');
  expect(substituteSystemValues("{{sys:missing}}", system)).toBe("{{sys:missing}}");
});

// Drives a Starcloud gateway (or worker) with the official OpenAI SDK and
// prints what it saw as one JSON object; tests/e2e/test_openai_sdk.py checks
// it against the same requests sent to a worker directly.
//
// Usage: node sdk_calls.mjs BASE_URL MODEL
import OpenAI from "openai";

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
const out = {};

async function typed(fn) {
  try {
    await fn();
    return { thrown: false };
  } catch (e) {
    return {
      thrown: true,
      class: e.constructor.name,
      isAPIError: e instanceof OpenAI.APIError,
      status: e.status ?? null,
      type: e.type ?? null,
      param: e.param ?? null,
      code: e.code ?? null,
      message: e.message,
    };
  }
}

// Completions, whole and streamed.
const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12 });
out.completion = { text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage };
let text = "";
let chunks = 0;
for await (const ch of await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, stream: true })) {
  text += ch.choices[0]?.text ?? "";
  chunks++;
}
out.completion_stream = { text, chunks };

// Prompt arrays, n, logprobs, max_completion_tokens.
const multi = await client.completions.create({
  model, prompt: ["abc", "xyz"], n: 2, max_tokens: 4, logprobs: 2, temperature: 1, seed: 5,
});
out.multi = multi.choices.map((x) => ({ index: x.index, text: x.text, lp: x.logprobs.token_logprobs.length, top: Object.keys(x.logprobs.top_logprobs[0]).length }));
const mct = await client.completions.create({ model, prompt: "abc", max_completion_tokens: 3 });
out.max_completion_tokens = mct.usage.completion_tokens;

// Chat: developer role, content parts, logprobs, n; streamed with usage.
const chat = await client.chat.completions.create({
  model,
  messages: [
    { role: "developer", content: [{ type: "text", text: "be " }, { type: "text", text: "brief" }] },
    { role: "user", content: "hello" },
  ],
  max_completion_tokens: 8, logprobs: true, top_logprobs: 2, n: 2,
});
out.chat = chat.choices.map((x) => ({ index: x.index, content: x.message.content, role: x.message.role, lp: x.logprobs.content.length, top: x.logprobs.content[0].top_logprobs.length }));
const sysChat = await client.chat.completions.create({
  model, messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hello" }], max_completion_tokens: 8,
});
out.chat_system = sysChat.choices[0].message.content;
let ctext = "";
let usageChunks = 0;
let lastUsage = null;
let role = null;
for await (const ch of await client.chat.completions.create({
  model, messages: [{ role: "user", content: "hello" }], max_tokens: 8, stream: true, stream_options: { include_usage: true },
})) {
  if (ch.usage) { usageChunks++; lastUsage = ch.usage; }
  if (ch.choices.length) { ctext += ch.choices[0].delta.content ?? ""; role = role ?? ch.choices[0].delta.role ?? null; }
}
out.chat_stream = { text: ctext, usageChunks, usage: lastUsage, role };
let plain = 0;
for await (const ch of await client.chat.completions.create({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 4, stream: true })) {
  if (ch.usage) plain++;
}
out.chat_stream_no_usage = plain;
// The SDK's stream helper assembles the whole message.
const runner = client.chat.completions.stream({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 8 });
const final = await runner.finalChatCompletion();
out.chat_helper = final.choices[0].message.content;

// Embeddings: the SDK asks base64 and decodes it; and floats when asked.
const e64 = await client.embeddings.create({ model, input: ["hello", "world"] });
const ef = await client.embeddings.create({ model, input: "hello", encoding_format: "float" });
const ed = await client.embeddings.create({ model, input: "hello", dimensions: 8 });
out.embeddings = {
  n: e64.data.length, dim: e64.data[0].embedding.length,
  same: e64.data[0].embedding.every((v, i) => Math.abs(v - ef.data[0].embedding[i]) < 1e-6),
  norm: Math.hypot(...e64.data[1].embedding), dims8: ed.data[0].embedding.length,
};

// Models.
const list = await client.models.list();
out.models = list.data.map((m) => m.id);
out.model = (await client.models.retrieve(model)).id;
out.model_missing = await typed(() => client.models.retrieve("no-such-model"));

// Errors as the SDK's typed errors.
out.err_unknown_model = await typed(() => client.completions.create({ model: "nope", prompt: "x" }));
out.err_bad_temperature = await typed(() => client.completions.create({ model, prompt: "x", temperature: 5 }));
out.err_bad_max_tokens = await typed(() => client.completions.create({ model, prompt: "x", max_tokens: -1 }));
out.err_content_part = await typed(() => client.chat.completions.create({
  model, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x/y.png" } }] }],
}));
// What the worker cannot honour is refused naming the field, never ignored;
// the same fields at their neutral values are a plain request.
const hello = [{ role: "user", content: "hello" }];
out.err_tool_choice = await typed(() => client.chat.completions.create({ model, messages: hello, tool_choice: "required" }));
out.err_tools = await typed(() => client.chat.completions.create({
  model, messages: hello, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }], tool_choice: "auto",
}));
out.err_response_format = await typed(() => client.chat.completions.create({
  model, messages: hello, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" } } },
}));
out.err_unknown_field = await typed(() => client.completions.create({ model, prompt: "x", top_k: 5 }));
const neutral = await client.chat.completions.create({
  model, messages: hello, max_tokens: 8, tools: [], tool_choice: "none", response_format: { type: "text" }, user: "u-1",
});
out.chat_neutral = neutral.choices[0].message.content;
out.err_stream_error = await typed(async () => {
  for await (const _ of await client.completions.create({ model, prompt: "x", stream: true, logprobs: 9 })) { /* none */ }
});

// Aborts: leave a stream early, and abort one in flight.
let got = 0;
for await (const ch of await client.completions.create({ model, prompt: "the quick brown fox", max_tokens: 100, stream: true })) {
  if (++got === 2) break;
}
const ac = new AbortController();
out.abort = await typed(async () => {
  const s = await client.completions.create({ model, prompt: "the quick brown fox", max_tokens: 100, stream: true }, { signal: ac.signal });
  let n = 0;
  for await (const _ of s) { if (++n === 2) ac.abort(); }
});
out.abort_break_chunks = got;

console.log(JSON.stringify(out));

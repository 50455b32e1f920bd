// Leaves N streams early with the official OpenAI SDK, the ways a client
// application does: stopping the iteration (`break`, a chat UI's stop
// button), aborting through an AbortSignal, and the SDK's own timeout.
// Prints {"break": n, "abort": n, "timeout": n} once all are done.
//
// Usage: node sdk_aborts.mjs BASE_URL MODEL N
import OpenAI from "openai";

const [base, model, count] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 });
const done = { break: 0, abort: 0, timeout: 0 };
const body = { model, prompt: "the quick brown fox", max_tokens: 100, stream: true };

for (let i = 0; i < Number(count); i++) {
  const how = ["break", "abort", "timeout"][i % 3];
  if (how === "break") {
    for await (const _ of await client.completions.create(body)) break;
  } else if (how === "abort") {
    const ac = new AbortController();
    const s = await client.completions.create(body, { signal: ac.signal });
    for await (const _ of s) ac.abort();
  } else {
    // A timeout shorter than the answer: the SDK gives up mid-stream or
    // before the head, whichever comes first.
    try {
      for await (const _ of await client.completions.create(body, { timeout: 5 })) { /* read */ }
    } catch (e) {
      if (!(e instanceof OpenAI.APIConnectionTimeoutError || e instanceof OpenAI.APIUserAbortError ||
            e.name === "AbortError" || e instanceof OpenAI.APIConnectionError)) throw e;
    }
  }
  done[how]++;
}
console.log(JSON.stringify(done));

// The npm openai client against a server of llama-server's API: chat (at
// once, streamed, with tools offered) and completions ("chat"), or
// embeddings ("embeddings"). Prints what it read as JSON.
import OpenAI from "openai";

const [what, base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "sk-test", maxRetries: 0 });
const out = {};
if (what === "embeddings") {
  const e = await client.embeddings.create({ model: "tiny", input: ["hello world", "good bye"] });
  out.embeddings = e.data.map(d => d.embedding);
  console.log(JSON.stringify(out));
  process.exit(0);
}
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello there" }];

const chat = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 10, temperature: 0 });
out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage.total_tokens };

const stream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
let streamed = "", chunks = 0, usage = 0;
for await (const chunk of stream) {
  chunks++;
  for (const c of chunk.choices) streamed += c.delta.content ?? "";
  if (chunk.usage) usage = chunk.usage.total_tokens;
}
out.stream = { text: streamed, usage };

const tools = [{ type: "function", function: { name: "get_weather", description: "the weather of a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const tc = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 10, temperature: 0, tools });
out.tools = { text: tc.choices[0].message.content, finish: tc.choices[0].finish_reason, calls: (tc.choices[0].message.tool_calls ?? []).map(c => c.function.name + c.function.arguments) };

const cmpl = await client.completions.create({ model: "tiny", prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
out.completion = { text: cmpl.choices[0].text, finish: cmpl.choices[0].finish_reason };
console.log(JSON.stringify(out));

// `vllm-cpp serve` driven by the official `openai` npm client: models, completions and
// chat (plain and streamed; streamed deltas concatenate to the plain result for greedy
// requests), usage, stop strings, logprobs, errors as the client's typed exceptions,
// concurrent streams, a client that aborts mid-stream (its request is aborted and
// its KV pages returned, seen through /metrics), response_format json_schema read
// back by the client's parse(), and tools with tool_choice required and a named
// function, plain and through the client's stream helper.
//
//   node openai_client_test.mjs VLLM_CPP MODEL_DIR TOKENIZER_DIR
//
// Exits 77 (ctest's "skipped") when the openai package is not installed
// (tools/install_deps.sh runs `npm ci --prefix tests/openai_client`).
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  console.log('openai_client: the openai npm package is not installed (npm ci --prefix tests/openai_client): skipped');
  process.exit(77);
}

const [vllmCpp, modelDir, tokenizerDir] = process.argv.slice(2);
const MODEL = 'tiny';
const API_KEY = 'sk-test';
let server;
let baseUrl;
let client;

// Starts the server on a free port; resolves with its address once it listens.
function startServer() {
  const args = ['serve', modelDir, '--tokenizer', tokenizerDir, '--port', '0', '--served-model-name', MODEL,
                '--api-key', API_KEY, '--max-model-len', '512', '--num-gpu-blocks-override', '512', '--threads', '1',
                '--enable-auto-tool-choice', '--tool-call-parser', 'hermes'];
  server = spawn(vllmCpp, args, { stdio: ['ignore', 'inherit', 'pipe'] });
  process.on('exit', () => server.kill());  // never leave a server behind, whatever ends this process
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${seen}`)), 60_000);
    server.stderr.on('data', (data) => {
      const text = data.toString();
      if (!baseUrl) seen += text;
      const match = /on (http:\/\/[\d.]+:\d+)/.exec(seen);
      if (match && !baseUrl) {
        clearTimeout(timer);
        baseUrl = match[1];
        resolve(baseUrl);
      }
    });
    server.on('exit', (code) => reject(new Error(`the server exited with ${code}:\n${seen}`)));
  });
}

async function metric(name, label = '') {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) && line.includes(label)) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  throw new Error(`no metric ${name} ${label}`);
}

async function waitUntilIdle() {
  for (let attempt = 0; attempt < 3000; ++attempt) {
    if ((await metric('vllm:num_requests_running')) === 0 && (await metric('vllm:num_requests_waiting')) === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('requests still running after 60 s');
}

const greedy = (maxTokens) => ({ model: MODEL, temperature: 0, max_tokens: maxTokens, ignore_eos: true,
                                 return_token_ids: true });
const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello there' }];

before(async () => {
  await startServer();
  client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: API_KEY, maxRetries: 0 });
});

after(async () => {
  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  server.kill('SIGTERM');
  assert.deepEqual(await exited, { code: 0, signal: null }, 'SIGTERM stops the server cleanly');
});

test('models lists the served name', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
});

test('completions: plain and streamed agree, with usage', async () => {
  const request = { ...greedy(12), prompt: 'abc def' };
  const whole = await client.completions.create(request);
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 12);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 12);

  const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  const ids = [];
  let usage;
  let finish;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.text;
      ids.push(...choice.token_ids);
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.deepEqual(ids, whole.choices[0].token_ids);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, whole.usage);
});

test('chat: plain and streamed agree', async () => {
  const request = { ...greedy(10), messages };
  const whole = await client.chat.completions.create(request);
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.usage.completion_tokens, 10);

  const stream = await client.chat.completions.create({ ...request, stream: true });
  let text = '';
  const ids = [];
  let role;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    role = role ?? choice.delta.role;
    text += choice.delta.content ?? '';
    ids.push(...(choice.token_ids ?? []));
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.deepEqual(ids, whole.choices[0].token_ids);
});

test('stop strings end the text', async () => {
  const free = await client.completions.create({ ...greedy(24), prompt: 'hello' });
  const chars = Array.from(free.choices[0].text);
  const stop = chars[Math.floor(chars.length / 2)];
  const stopped = await client.completions.create({ ...greedy(24), prompt: 'hello', stop: [stop] });
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  assert.equal(stopped.choices[0].text, free.choices[0].text.slice(0, free.choices[0].text.indexOf(stop)));
});

test('logprobs in OpenAI\'s format', async () => {
  const chat = await client.chat.completions.create({ ...greedy(5), messages, logprobs: true, top_logprobs: 3 });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const item of content) {
    assert.equal(typeof item.token, 'string');
    assert.ok(item.logprob <= 0);
    assert.ok(Array.isArray(item.bytes));
    assert.equal(item.top_logprobs.length, 3);
    assert.equal(item.top_logprobs[0].logprob, item.logprob, 'greedy picks the most likely token');
  }
  const completion = await client.completions.create({ ...greedy(4), prompt: 'hello', logprobs: 2 });
  const logprobs = completion.choices[0].logprobs;
  assert.equal(logprobs.tokens.length, 4);
  assert.equal(logprobs.token_logprobs.length, 4);
  assert.equal(logprobs.text_offset[0], 0);
});

test('errors arrive as the client\'s typed exceptions', async () => {
  await assert.rejects(client.completions.create({ ...greedy(4), prompt: 'x', temperature: -1 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
    assert.equal(e.status, 400);
    assert.match(e.message, /temperature/);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.completions.create({ ...greedy(4), model: 'nope', prompt: 'x' }), OpenAI.NotFoundError);
  await assert.rejects(client.chat.completions.create({ ...greedy(600), messages }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.match(e.message, /maximum context length is 512 tokens/);
    return true;
  });
  const wrongKey = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), OpenAI.AuthenticationError);
});

test('concurrent streams each equal their request alone', async () => {
  const requests = Array.from({ length: 16 },
                               (_, i) => ({ ...greedy(12), prompt: `request ${i} ${'a'.repeat(i % 5)}` }));
  const alone = [];
  for (const request of requests) alone.push((await client.completions.create(request)).choices[0].token_ids);
  const together = await Promise.all(requests.map(async (request) => {
    const ids = [];
    for await (const chunk of await client.completions.create({ ...request, stream: true })) {
      for (const choice of chunk.choices) ids.push(...choice.token_ids);
    }
    return ids;
  }));
  assert.deepEqual(together, alone);
});

test('a client that aborts mid-stream frees its request', async () => {
  const abortsBefore = await metric('vllm:request_success_total', 'finished_reason="abort"');
  const controller = new AbortController();
  const stream = await client.chat.completions.create({ ...greedy(440), messages, stream: true },
                                                      { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      assert.ok(chunk.choices.length > 0);
      if (++chunks === 3) controller.abort();
    }
  } catch (e) {
    assert.equal(e.name, 'APIUserAbortError', String(e));  // the iteration may end quietly instead
  }
  assert.ok(chunks >= 3 && chunks < 440, `the stream went on after the abort: ${chunks} chunks`);
  await waitUntilIdle();
  assert.equal(await metric('vllm:kv_cache_usage_perc'), 0);
  assert.equal(await metric('vllm:request_success_total', 'finished_reason="abort"'), abortsBefore + 1);
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 8 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};

test('response_format json_schema: parse() gives the object', async () => {
  const schema = { type: 'object', properties: { answer: { type: 'string', maxLength: 6 }, n: { type: 'integer' } },
                   required: ['answer', 'n'], additionalProperties: false };
  const completion = await client.chat.completions.parse({
    model: MODEL, messages, max_tokens: 400, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } },
    // vLLM's extra field: greedy decoding of a random-weight model would fill every gap with whitespace.
    structured_outputs: { disable_any_whitespace: true },
  });
  const parsed = completion.choices[0].message.parsed;
  assert.equal(typeof parsed.answer, 'string');
  assert.ok(parsed.answer.length <= 6);
  assert.ok(Number.isInteger(parsed.n));
  assert.deepEqual(Object.keys(parsed), ['answer', 'n']);
});

test('tools: required and named calls, plain and streamed', async () => {
  for (const toolChoice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const request = { model: MODEL, messages, tools: [weather], tool_choice: toolChoice, max_tokens: 200, temperature: 0 };
    const whole = await client.chat.completions.create(request);
    const choice = whole.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.ok(choice.message.tool_calls.length >= 1);
    for (const call of choice.message.tool_calls) {
      assert.equal(call.function.name, 'get_weather');
      const args = JSON.parse(call.function.arguments);
      assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
      assert.ok(typeof args.city === 'string' && args.city.length <= 8);
    }
    const stream = client.chat.completions.stream(request);
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(final.choices[0].message.tool_calls.map((c) => c.function),
                     choice.message.tool_calls.map((c) => c.function));
  }
});

// The official `openai` npm client against Tandem's OpenAI-compatible API (driven by
// clients_e2e_test.sh): models, whole and streamed completions (greedy: the same text),
// usage with acceptance statistics, the speculation extension, errors as the SDK's typed
// errors, the bearer token, cancellation by aborting a stream (the running sequence count
// returns to 0), and concurrent requests.
// Usage: node openai_sdk_check.js NODE_MODULES BASE_URL METRICS_URL TOKEN MODEL
'use strict';
const path = require('path');
const assert = require('assert');

const [nodeModules, baseURL, metricsURL, token, model] = process.argv.slice(2);
const { OpenAI } = require(path.join(nodeModules, 'openai'));
const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0, timeout: 60000 });

async function runningSequences() {
  const text = await (await fetch(metricsURL)).text();
  const line = text.split('\n').find((l) => l.startsWith('tandem_running_sequences '));
  return Number(line.split(' ')[1]);
}

async function expectError(promise, ErrorClass, status, fragment) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof ErrorClass, `expected ${ErrorClass.name}, got ${e}`);
    assert.strictEqual(e.status, status);
    assert(e.error && typeof e.error.message === 'string', JSON.stringify(e.error));
    assert(e.error.message.includes(fragment), `"${e.error.message}" lacks "${fragment}"`);
    return e;
  }
  assert.fail(`expected ${ErrorClass.name}`);
}

const greedy = { model, prompt: 'def fibonacci(n):\n', max_tokens: 16, temperature: 0 };

async function main() {
  const models = await client.models.list();
  assert.deepStrictEqual(models.data.map((m) => m.id), [model]);
  console.log('ok: models.list');

  const whole = await client.completions.create(greedy);
  const text = whole.choices[0].text;
  assert(text.length > 0);
  assert(['length', 'stop'].includes(whole.choices[0].finish_reason));
  assert(whole.usage.completion_tokens > 0 && whole.usage.prompt_tokens > 0);
  assert(typeof whole.usage.tandem.acceptance_rate === 'number', JSON.stringify(whole.usage));
  console.log(`ok: completions.create (${whole.usage.completion_tokens} tokens)`);

  const stream = await client.completions.create({
    ...greedy,
    stream: true,
    stream_options: { include_usage: true },
    speculation: { method: 'draft', num_speculative_tokens: 3 },
  });
  let streamed = '';
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices.length) streamed += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
    chunks++;
  }
  assert.strictEqual(streamed, text, 'greedy streamed text differs from the whole one');
  assert(usage && usage.completion_tokens === whole.usage.completion_tokens);
  assert.strictEqual(usage.tandem.method, 'SPECULATION_METHOD_DRAFT');
  assert(usage.tandem.draft_tokens_proposed > 0, JSON.stringify(usage.tandem));
  console.log(`ok: streamed completion equals the whole one (${chunks} chunks, acceptance ` +
              `${usage.tandem.acceptance_rate.toFixed(2)})`);

  await expectError(client.completions.create({ ...greedy, max_tokens: 'ten' }),
                    OpenAI.BadRequestError, 400, 'max_tokens');
  await expectError(client.completions.create({ ...greedy, model: 'gpt-4' }),
                    OpenAI.NotFoundError, 404, 'does not exist');
  await expectError(client.completions.create({ ...greedy, n: 2 }),
                    OpenAI.BadRequestError, 400, 'only 1');
  await expectError(client.completions.create({ ...greedy, temperature: 500 }),
                    OpenAI.BadRequestError, 400, 'temperature');
  await expectError(client.chat.completions.create({ model, messages: [
                        { role: 'user', content: 'hi' }, { role: 'system', content: 'late' }] }),
                    OpenAI.BadRequestError, 400, 'a system message must come first');
  const anonymous = new OpenAI({ apiKey: 'wrong', baseURL, maxRetries: 0 });
  await expectError(anonymous.completions.create(greedy), OpenAI.AuthenticationError, 401,
                    'invalid bearer token');
  console.log('ok: bad requests are typed errors (400, 404, 401)');

  const long = await client.completions.create({
    model, prompt: 'import os\n', max_tokens: 4000, ignore_eos: true, stream: true });
  let received = 0;
  for await (const chunk of long) {
    if (++received === 3) break;  // Leaving the loop aborts the request.
  }
  let running = await runningSequences();
  for (let i = 0; i < 200 && running > 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    running = await runningSequences();
  }
  assert.strictEqual(running, 0, 'the aborted request is still running');
  console.log('ok: aborting a stream cancels the request (running sequences back to 0)');

  const messages = [{ role: 'developer', content: 'Write Python.' },
                    { role: 'user', content: 'def add(a, b):' }];
  const chat = await client.chat.completions.create(
      { model, messages, max_tokens: 12, temperature: 0, logprobs: true });
  const content = chat.choices[0].message.content;
  assert(content.length > 0 && chat.choices[0].message.role === 'assistant');
  assert(chat.choices[0].logprobs.content.length === chat.usage.completion_tokens);
  let chatStreamed = '';
  const chatStream = await client.chat.completions.create(
      { model, messages, max_tokens: 12, temperature: 0, stream: true });
  for await (const chunk of chatStream) chatStreamed += chunk.choices[0].delta.content || '';
  assert.strictEqual(chatStreamed, content);
  console.log('ok: chat.completions (whole == streamed, logprobs per token)');

  const results = await Promise.all([0, 1, 2, 3].map((i) => client.completions.create(
      { model, prompt: `def f${i}(x):\n`, max_tokens: 8, temperature: 0, stream: i % 2 === 1 })
      .then(async (r) => {
        if (!r[Symbol.asyncIterator]) return r.choices[0].text;
        let t = '';
        for await (const c of r) t += c.choices.length ? c.choices[0].text : '';
        return t;
      })));
  assert(results.every((t) => t.length > 0));
  console.log('ok: 4 concurrent requests');
  const after = await client.completions.create(greedy);
  assert.strictEqual(after.choices[0].text, text);
  console.log('ok: still serving, same greedy text');
}

main().catch((e) => {
  console.error(`FAIL: ${e.stack || e}`);
  process.exit(1);
});

// api.mjs: lathe serve through OpenAI's Node client: models, completions and
// chat for the base model and the adapters, streams with usage, n > 1,
// stop strings, seeds, adapters loaded and unloaded at run time, every
// error's shape (an error after a stream began too: an adapter whose file
// went away before it was loaded again), 50 clients at once, and greedy
// output equal to `lathe generate`'s for the same prompt and adapter.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { assert, env, client, test, finish, apiError, expectError, collect, raw } from './lib.mjs';

const ai = client();
const [a1, a2] = env.adapters;
const greedy = { temperature: 0 };

function complete(model, prompt, extra = {}) {
  return ai.completions.create({ model, prompt, max_tokens: 12, ...greedy, ...extra });
}
function chat(model, content, extra = {}) {
  return ai.chat.completions.create({ model, messages: [{ role: 'user', content }], max_tokens: 12, ...greedy, ...extra });
}

// `lathe generate`'s text (its trailing newline removed), decoded as Node
// decodes bytes, which is also how the server decodes them
function generate(args) {
  const out = execFileSync(env.lathe, ['generate', '--model', env.model, '--max-new', '12', '--threads', '1', ...args]);
  return out.toString('utf8').replace(/\n$/, '');
}

await test('GET /v1/models lists the base model and each adapter as vLLM does', async () => {
  const page = await ai.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, [env.base, ...env.adapters]);
  for (const m of page.data) {
    assert.equal(m.object, 'model');
    assert.equal(typeof m.created, 'number');
    assert.equal(m.owned_by, 'lathe');
    assert.equal(m.parent, m.id === env.base ? null : env.base);
    assert.equal(typeof m.root, 'string');
  }
  const one = await ai.models.retrieve(a1);
  assert.equal(one.id, a1);
  assert.equal(one.root, env.dirs[a1]);
});

await test('completions: base and adapter by model name, usage and finish_reason', async () => {
  for (const model of [env.base, a1, a2]) {
    const r = await complete(model, 'The king said');
    assert.equal(r.object, 'text_completion');
    assert.equal(r.model, model);
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 12);
    assert.ok(r.usage.prompt_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
    assert.ok(r.choices[0].text.length > 0);
  }
});

await test('chat: system, user and assistant messages, base and adapter', async () => {
  for (const model of [env.base, a1]) {
    const r = await ai.chat.completions.create({
      model, max_tokens: 8, temperature: 0,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi.' },
        { role: 'user', content: [{ type: 'text', text: 'How are ' }, { type: 'text', text: 'you?' }] },
      ],
    });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 10);
  }
});

await test('greedy output equals `lathe generate` (completions and chat, base and adapter)', async () => {
  const prompt = 'To be, or not to be';
  assert.equal((await complete(env.base, prompt)).choices[0].text, generate(['--prompt', prompt]));
  for (const a of [a1, a2]) {
    const want = generate(['--adapter', env.dirs[a], '--prompt', prompt]);
    assert.equal((await complete(a, prompt)).choices[0].text, want);
    const wantChat = generate(['--adapter', env.dirs[a], '--chat', '--prompt', prompt]);
    assert.equal((await chat(a, prompt)).choices[0].message.content, wantChat);
  }
});

await test('stream with include_usage: chunks in OpenAI shape, text equal to the whole reply', async () => {
  const whole = await chat(a1, 'Tell me a story', { max_tokens: 16 });
  const s = await collect(await chat(a1, 'Tell me a story', { max_tokens: 16, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.text[0], whole.choices[0].message.content);
  assert.equal(s.finish[0], whole.choices[0].finish_reason);
  assert.deepEqual(s.usage, whole.usage);
  assert.equal(s.chunks[0].object, 'chat.completion.chunk');
  assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
  const last = s.chunks[s.chunks.length - 1];
  assert.deepEqual(last.choices, []);
  for (const c of s.chunks.slice(0, -1)) assert.equal(c.usage, null);
  const cs = await collect(await complete(env.base, 'Once upon', { stream: true }));
  assert.equal(cs.text[0], (await complete(env.base, 'Once upon')).choices[0].text);
  assert.equal(cs.finish[0], 'length');
  assert.equal(cs.usage, null);
  assert.equal(cs.chunks[0].object, 'text_completion');
});

await test('sampling: the same seed gives the same text; n choices use seed + i', async () => {
  const opts = { temperature: 1.5, top_p: 0.95, max_tokens: 24, seed: 1234 };
  const a = await complete(a2, 'Now is the winter', opts);
  const b = await complete(a2, 'Now is the winter', opts);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const n = await complete(a2, 'Now is the winter', { ...opts, n: 3 });
  assert.equal(n.choices.length, 3);
  assert.deepEqual(n.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(n.choices[0].text, a.choices[0].text);
  const third = await complete(a2, 'Now is the winter', { ...opts, seed: 1236 });
  assert.equal(n.choices[2].text, third.choices[0].text);
  assert.equal(n.usage.completion_tokens, 3 * 24);
  const other = await complete(a2, 'Now is the winter', { ...opts, seed: 99 });
  assert.notEqual(other.choices[0].text, a.choices[0].text);
  // streamed, a sampled text of any bytes decodes to the same characters
  const s = await collect(await complete(a2, 'Now is the winter', { ...opts, stream: true }));
  assert.equal(s.text[0], a.choices[0].text);
});

await test('n > 1 streamed: every choice gets its text and its finish_reason', async () => {
  const s = await collect(await chat(env.base, 'Hi', { n: 4, temperature: 1, seed: 5, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.text.length, 4);
  assert.equal(s.finish.filter(Boolean).length, 4);
  assert.ok(s.usage.completion_tokens >= 4);
});

await test('stop strings: the text is cut before the stop string, finish_reason stop', async () => {
  const full = (await complete(env.base, 'The king said', { max_tokens: 16 })).choices[0].text;
  assert.ok(full.length > 6, `greedy text too short: ${JSON.stringify(full)}`);
  const stop = full.slice(3, 6);
  const cut = full.slice(0, full.indexOf(stop));
  const r = await complete(env.base, 'The king said', { max_tokens: 16, stop });
  assert.equal(r.choices[0].text, cut);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 16);
  const arr = await complete(env.base, 'The king said', { max_tokens: 16, stop: ['#never#', stop] });
  assert.equal(arr.choices[0].text, cut);
  const s = await collect(await complete(env.base, 'The king said', { max_tokens: 16, stop, stream: true }));
  assert.equal(s.text[0], cut);
  assert.equal(s.finish[0], 'stop');
  const none = await complete(env.base, 'The king said', { max_tokens: 16, stop: '#never#' });
  assert.equal(none.choices[0].text, full);
});

await test('token-id prompts and several prompts in one completions request', async () => {
  const r = await ai.completions.create({ model: env.base, prompt: ['The king said', 'Once upon'], max_tokens: 4, temperature: 0, n: 2 });
  assert.equal(r.choices.length, 4);
  assert.equal(r.choices[0].text, r.choices[1].text);
  const single = await complete(env.base, 'Once upon', { max_tokens: 4 });
  assert.equal(r.choices[2].text, single.choices[0].text);
  const ids = await ai.completions.create({ model: env.base, prompt: [1, 2, 3], max_tokens: 3, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 3);
});

await test('400 names the field: type, range, unsupported, context', async () => {
  const cases = [
    [{ temperature: 3 }, 'temperature'],
    [{ temperature: 'hot' }, 'temperature'],
    [{ top_p: 0 }, 'top_p'],
    [{ top_p: 1.5 }, 'top_p'],
    [{ n: 0 }, 'n'],
    [{ n: 17 }, 'n'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ max_tokens: 1.5 }, 'max_tokens'],
    [{ seed: 'x' }, 'seed'],
    [{ stop: 5 }, 'stop'],
    [{ stop: [''] }, 'stop'],
    [{ stream: 'yes' }, 'stream'],
    [{ stream_options: { include_usage: true } }, 'stream_options'],
    [{ logprobs: true }, 'logprobs'],
    [{ presence_penalty: 1 }, 'presence_penalty'],
    [{ tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
    [{ messages: [] }, 'messages'],
    [{ messages: [{ role: 'user', content: 7 }] }, 'messages'],
    [{ messages: [{ role: 'robot', content: 'hi' }] }, 'messages'],
    [{ max_tokens: 5000 }, 'max_tokens'],
  ];
  for (const [extra, param] of cases) {
    const e = await apiError(chat(a1, 'Hi', extra));
    expectError(e, 400, param);
    assert.equal(e.error.type, 'invalid_request_error');
  }
  const long = await apiError(complete(env.base, 'hello '.repeat(2100)));
  expectError(long, 400, 'prompt');
  assert.equal(long.error.code, 'context_length_exceeded');
  assert.match(long.error.message, /maximum context length is \d+ tokens/);
  const noPrompt = await apiError(ai.completions.create({ model: env.base, max_tokens: 2 }));
  expectError(noPrompt, 400, 'prompt');
  const badJson = await raw('/v1/chat/completions', { method: 'POST', body: '{"model": ' });
  assert.equal(badJson.status, 400);
  assert.match((await badJson.json()).error.message, /not valid JSON/);
});

await test('401 without a key and with a wrong one; /health and /metrics need none', async () => {
  const wrong = await apiError(client({ apiKey: 'not-the-key' }).models.list());
  expectError(wrong, 401);
  assert.equal(wrong.error.code, 'invalid_api_key');
  const none = await fetch(`${env.url}/v1/models`);
  assert.equal(none.status, 401);
  assert.equal((await none.json()).error.code, 'invalid_api_key');
  assert.equal((await fetch(`${env.url}/health`)).status, 200);
  assert.equal((await fetch(`${env.url}/ready`)).status, 200);
  assert.equal((await fetch(`${env.url}/metrics`)).status, 200);
});

await test('404 for an unknown model (listing the models) and an unknown route; 405; 413', async () => {
  const e = await apiError(chat('no-such-model', 'Hi'));
  expectError(e, 404, 'model');
  assert.equal(e.error.code, 'model_not_found');
  for (const id of [env.base, ...env.adapters]) assert.ok(e.error.message.includes(id), e.error.message);
  const route = await raw('/v1/nothing-here');
  assert.equal(route.status, 404);
  assert.ok((await route.json()).error.message.includes('/v1/nothing-here'));
  assert.equal((await raw('/elsewhere')).status, 404);
  const get = await raw('/v1/completions');
  assert.equal(get.status, 405);
  assert.equal(get.headers.get('allow'), 'POST');
  const big = await apiError(complete(env.base, 'x'.repeat(100 * 1024)));
  expectError(big, 413);
});

await test('adapters at run time: load, serve, refuse a bad one, unload', async () => {
  const dir = `${env.work}/runtime`;
  cpSync(env.dirs[a1], dir, { recursive: true });
  const loaded = await ai.post('/load_lora_adapter', { body: { lora_name: 'runtime', lora_path: dir } });
  assert.equal(loaded.id, 'runtime');
  assert.ok((await ai.models.list()).data.some((m) => m.id === 'runtime' && m.parent === env.base));
  const r = await complete('runtime', 'To be, or not to be');
  assert.equal(r.choices[0].text, (await complete(a1, 'To be, or not to be')).choices[0].text);
  expectError(await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'runtime', lora_path: dir } })), 400, 'lora_name');
  expectError(await apiError(ai.post('/load_lora_adapter', { body: { lora_name: env.base, lora_path: dir } })), 400, 'lora_name');
  expectError(await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'gone', lora_path: `${env.work}/missing` } })), 400, 'lora_path');
  expectError(await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'x' } })), 400, 'lora_path');
  // a rank that does not match the tensors
  const bad = `${env.work}/badrank`;
  cpSync(env.dirs[a1], bad, { recursive: true });
  const cfg = JSON.parse(readFileSync(`${bad}/adapter_config.json`, 'utf8'));
  cfg.r = cfg.r * 2;
  writeFileSync(`${bad}/adapter_config.json`, JSON.stringify(cfg));
  const e = await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'badrank', lora_path: bad } }));
  expectError(e, 400, 'lora_path');
  assert.ok(!(await ai.models.list()).data.some((m) => m.id === 'badrank'));
  // a target module the tensors do not have
  const tgt = `${env.work}/badtarget`;
  cpSync(env.dirs[a1], tgt, { recursive: true });
  const tc = JSON.parse(readFileSync(`${tgt}/adapter_config.json`, 'utf8'));
  tc.target_modules = [...tc.target_modules, 'gate_proj'];
  writeFileSync(`${tgt}/adapter_config.json`, JSON.stringify(tc));
  const et = await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'badtarget', lora_path: tgt } }));
  expectError(et, 400, 'lora_path');
  assert.match(et.error.message, /gate_proj/);
  // an adapter trained on another base model (other shapes and vocabulary)
  const other = await apiError(ai.post('/load_lora_adapter', { body: { lora_name: 'other', lora_path: env.other } }));
  expectError(other, 400, 'lora_path');
  assert.ok(other.error.message.length > 40, other.error.message);
  await ai.post('/unload_lora_adapter', { body: { lora_name: 'runtime' } });
  assert.ok(!(await ai.models.list()).data.some((m) => m.id === 'runtime'));
  expectError(await apiError(complete('runtime', 'Hi')), 404, 'model');
  expectError(await apiError(ai.post('/unload_lora_adapter', { body: { lora_name: 'runtime' } })), 404, 'lora_name');
  const noKey = await fetch(`${env.url}/v1/load_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'k', lora_path: dir }) });
  assert.equal(noKey.status, 401);
});

await test('50 clients at once across models and streams: none lost, each as it is alone', async () => {
  const prompts = ['The king said', 'Once upon', 'To be, or not to be', 'Now is the winter', 'Friends, Romans'];
  const models = [env.base, a1, a2];
  const alone = new Map();
  for (const m of models) for (const p of prompts) alone.set(`${m}|${p}`, (await complete(m, p, { max_tokens: 8 })).choices[0].text);
  const jobs = [];
  for (let i = 0; i < 50; i++) {
    const m = models[i % 3];
    const p = prompts[i % 5];
    const c = client(); // a connection of its own
    if (i % 2) jobs.push(collect(await c.completions.create({ model: m, prompt: p, max_tokens: 8, temperature: 0, stream: true })).then((s) => [m, p, s.text[0]]));
    else jobs.push(c.completions.create({ model: m, prompt: p, max_tokens: 8, temperature: 0 }).then((r) => [m, p, r.choices[0].text]));
  }
  const results = await Promise.all(jobs);
  assert.equal(results.length, 50);
  for (const [m, p, text] of results) assert.equal(text, alone.get(`${m}|${p}`), `${m} ${p}`);
});

await test('an adapter that cannot be loaded again: an error event in the stream, 500 whole', async () => {
  const dir = `${env.work}/fragile`;
  cpSync(env.dirs[a2], dir, { recursive: true });
  await ai.post('/load_lora_adapter', { body: { lora_name: 'fragile', lora_path: dir } });
  await complete('fragile', 'Hi', { max_tokens: 2 });
  await complete(a1, 'Hi', { max_tokens: 2 }); // --max-adapters 1: fragile leaves memory
  rmSync(`${dir}/adapter_model.safetensors`);
  const stream = await chat('fragile', 'Hi', { stream: true, max_tokens: 4 });
  let caught = null;
  try {
    for await (const c of stream) assert.ok(c.choices.every((ch) => !ch.finish_reason), 'no finish before the error');
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, 'the stream ended without an error');
  assert.match(caught.message, /could not be loaded again/);
  const whole = await apiError(complete('fragile', 'Hi', { max_tokens: 2 }));
  expectError(whole, 500);
  assert.match(whole.error.message, /could not be loaded again/);
  await ai.post('/unload_lora_adapter', { body: { lora_name: 'fragile' } });
});

await test('GET /metrics: counters by model and code, token counters, histograms, engine gauges', async () => {
  const text = await (await fetch(`${env.url}/metrics`)).text();
  writeFileSync(`${env.work}/metrics.txt`, text);
  for (const name of ['lathe_serve_requests_total', 'lathe_serve_prompt_tokens_total', 'lathe_serve_generation_tokens_total',
    'lathe_serve_time_to_first_token_seconds_bucket', 'lathe_serve_inter_token_latency_seconds_count',
    'lathe_serve_requests_running', 'lathe_serve_requests_waiting', 'lathe_serve_kv_cache_usage_ratio', 'lathe_serve_adapters_loaded'])
    assert.ok(text.includes(name), name);
  assert.match(text, new RegExp(`lathe_serve_requests_total\\{model="${a1}",code="200"\\} \\d+`));
  assert.match(text, /lathe_serve_requests_total\{model="",code="401"\} \d+/);
  assert.match(text, /lathe_serve_requests_total\{model="no-such-model",code="404"\}|lathe_serve_requests_total\{model="",code="404"\}/);
  const gen = Number(/lathe_serve_generation_tokens_total (\d+)/.exec(text)[1]);
  assert.ok(gen > 500, `generation tokens ${gen}`);
  const loaded = Number(/lathe_serve_adapters_loaded (\d+)/.exec(text)[1]);
  assert.ok(loaded <= 1, `--max-adapters 1, but ${loaded} adapters in memory`);
});

finish();

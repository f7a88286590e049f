// lib.mjs: what the lathe serve tests share: the server's address and the
// models from the environment tests/serve/openai.sh sets, OpenAI clients
// (no retries, so a 429 or 503 reaches the test), a small runner that
// counts passes and failures, and helpers for streams and errors.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

export { assert };

export const env = {
  url: process.env.SERVE_URL,         // http://127.0.0.1:PORT
  key: process.env.SERVE_KEY,         // the server's API key
  base: process.env.SERVE_BASE,       // the base model's id
  adapters: (process.env.SERVE_ADAPTERS || '').split(',').filter(Boolean),
  lathe: process.env.LATHE,
  model: process.env.SERVE_MODEL_DIR, // the base model's folder
  dirs: JSON.parse(process.env.SERVE_ADAPTER_DIRS || '{}'), // adapter name -> folder
  work: process.env.SERVE_WORK,       // the test's scratch folder
  other: process.env.SERVE_OTHER_ADAPTER, // an adapter of another base model
  pid: Number(process.env.SERVE_PID || 0),
};

export function client(opts = {}) {
  return new OpenAI({ baseURL: `${env.url}/v1`, apiKey: env.key, maxRetries: 0, timeout: 60000, ...opts });
}

let passed = 0;
let failed = 0;

// test(name, async fn): runs fn, prints ok / FAIL with the error.
export async function test(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok: ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL: ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

// Prints the tally and exits 1 when anything failed.
export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

// The error an API call throws; fails when it succeeds.
export async function apiError(promise) {
  try {
    await promise;
  } catch (e) {
    if (e instanceof OpenAI.APIError) return e;
    throw e;
  }
  throw new Error('the request succeeded; an error was expected');
}

// Checks an APIError's status and body shape (and its param when given).
export function expectError(e, status, param) {
  assert.equal(e.status, status, `status ${e.status}: ${e.message}`);
  assert.ok(e.error && typeof e.error.message === 'string' && e.error.message.length > 0, 'error.message');
  assert.ok(typeof e.error.type === 'string', 'error.type');
  assert.ok('param' in e.error && 'code' in e.error, 'error has param and code');
  if (param !== undefined) assert.equal(e.error.param, param, `param of: ${e.error.message}`);
}

// Reads a chat or completions stream: per-choice text and finish reasons,
// the chunks, and the usage chunk.
export async function collect(stream) {
  const text = [];
  const finish = [];
  const chunks = [];
  let usage = null;
  for await (const c of stream) {
    chunks.push(c);
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      const piece = ch.delta ? ch.delta.content : ch.text;
      text[ch.index] = (text[ch.index] || '') + (piece || '');
      if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
    }
  }
  return { text, finish, chunks, usage };
}

// fetch against the server with the key (or the headers given).
export function raw(path, init = {}) {
  const headers = { Authorization: `Bearer ${env.key}`, 'Content-Type': 'application/json', ...(init.headers || {}) };
  return fetch(`${env.url}${path}`, { ...init, headers });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// busy.mjs: against a server started with --max-batch 1 --max-waiting 1
// --drain-timeout 1: one request runs, one waits, the next is refused with
// 429 and Retry-After before any stream starts; the queue frees when the
// first two are cancelled (their clients go away) and the server serves
// again. Then SIGTERM during a stream far longer than the drain timeout:
// the stream ends with an error event (openai.sh checks the exit 0).
import { assert, env, client, test, finish, apiError, expectError, collect, sleep } from './lib.mjs';

const ai = client();
const long = { model: env.base, prompt: 'The king said', max_tokens: 1500, temperature: 0, stream: true };

await test('429 with Retry-After when the queue is full; served again after cancels', async () => {
  const running = await ai.completions.create(long);
  const it = running[Symbol.asyncIterator]();
  await it.next(); // its first chunk: it runs
  const waiting = await ai.completions.create(long);
  const e = await apiError(ai.completions.create({ ...long, stream: false, max_tokens: 4 }));
  expectError(e, 429);
  assert.equal(e.headers['retry-after'], '1');
  assert.equal(e.error.code, 'rate_limit_exceeded');
  const es = await apiError(ai.chat.completions.create({ model: env.base, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true }));
  expectError(es, 429);
  running.controller.abort();
  waiting.controller.abort();
  let ok = null;
  for (let i = 0; i < 100 && !ok; i++) {
    try {
      ok = await ai.completions.create({ model: env.base, prompt: 'Hi', max_tokens: 2 });
    } catch (err) {
      if (err.status !== 429) throw err;
      await sleep(100);
    }
  }
  assert.ok(ok, 'still 429 ten seconds after both clients went away');
  const s = await collect(await ai.completions.create({ model: env.base, prompt: 'Hi', max_tokens: 3, stream: true }));
  assert.equal(s.finish[0], 'length');
});

await test('a drain that times out cancels the stream with an error event', async () => {
  const stream = await ai.completions.create({ ...long, max_tokens: 2000 });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  const t0 = Date.now();
  process.kill(env.pid, 'SIGTERM');
  let caught = null;
  try {
    for (;;) if ((await it.next()).done) break;
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, 'the stream ended without an error');
  assert.match(caught.message, /server is stopping/);
  assert.ok(Date.now() - t0 < 15000, `the stream ran ${Date.now() - t0} ms after SIGTERM`);
});

finish();

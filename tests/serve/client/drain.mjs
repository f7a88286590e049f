// drain.mjs: SIGTERM while a stream runs: /health and new requests get 503,
// the running stream still completes to its last token and [DONE]
// (openai.sh then checks that the server exits 0).
import { assert, env, client, test, finish, apiError, expectError, collect, sleep } from './lib.mjs';

const ai = client();

await test('SIGTERM drains: new requests 503, the running stream completes', async () => {
  const stream = await ai.completions.create({ model: env.base, prompt: 'The king said', max_tokens: 600, temperature: 0, stream: true });
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  process.kill(env.pid, 'SIGTERM');
  let health = 200;
  for (let i = 0; i < 100 && health === 200; i++) {
    await sleep(20);
    health = (await fetch(`${env.url}/health`)).status;
  }
  assert.equal(health, 503, '/health while draining');
  const e = await apiError(ai.completions.create({ model: env.base, prompt: 'Hi', max_tokens: 2 }));
  expectError(e, 503);
  const rest = await collect({ [Symbol.asyncIterator]: () => it });
  assert.equal(rest.finish[0], 'length');
  const chunks = 1 + rest.chunks.length;
  assert.ok(chunks > 10, `only ${chunks} chunks`);
  assert.ok(first.value.choices.length === 1);
});

finish();

// llama_cpp_bench.mjs: llama.cpp, the benchmark's baseline (c), through npm's
// node-llama-cpp 3.21.1 and its prebuilt CPU build.
//
// usage: node llama_cpp_bench.mjs MODEL.gguf REQUESTS.json OUT.json
//             [--streams N] [--threads N] [--modules DIR]
//
// REQUESTS.json is bench_serve's: [{"prompt": [ids], "adapter": k, "max_new": n}]
// (the GGUF has the adapter merged, so "adapter" is not used here). --streams
// closed-loop clients each own one sequence of one context, so llama.cpp
// batches their evaluations together (node-llama-cpp's context batching);
// each takes the next request when its last one finished and generates
// max_new tokens greedily from the prompt's token ids. The time to first token
// runs from a request's start. DIR holds node_modules/node-llama-cpp
// (npm i --prefix DIR -E node-llama-cpp@3.21.1). OUT.json gets
// {"tokens_per_s", "ttft_ms": [...], "generated": [[ids]...], "seconds"}.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

function parseArgs(argv) {
  const a = { streams: 1, threads: 0, modules: "." , pos: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === "--streams") a.streams = Number(argv[++i]);
    else if (k === "--threads") a.threads = Number(argv[++i]);
    else if (k === "--modules") a.modules = argv[++i];
    else a.pos.push(k);
  }
  if (a.pos.length !== 3 || !(a.streams >= 1)) {
    console.error("usage: node llama_cpp_bench.mjs MODEL.gguf REQUESTS.json OUT.json " +
                  "[--streams N] [--threads N] [--modules DIR]");
    process.exit(1);
  }
  return a;
}

const args = parseArgs(process.argv.slice(2));
const [gguf, reqPath, outPath] = args.pos;
const entry = path.join(args.modules, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

const requests = JSON.parse(fs.readFileSync(reqPath, "utf8"));
const longest = Math.max(...requests.map((r) => r.prompt.length + r.max_new));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                               ...(args.threads > 0 ? { maxThreads: args.threads } : {}) });
const model = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
const context = await model.createContext({
  sequences: args.streams,
  contextSize: args.streams * (longest + 16),
  batchSize: Math.max(512, args.streams * 2),
  // F32 keys and values, as lathe's KV cache holds them: the same work
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
  ...(args.threads > 0 ? { threads: args.threads } : {}),
});

const generated = new Array(requests.length);
const ttft = new Array(requests.length);
let next = 0;

async function client() {
  const seq = context.getSequence();
  while (next < requests.length) {
    const i = next++;
    const r = requests[i];
    await seq.clearHistory();
    const t0 = performance.now();
    const out = [];
    for await (const tok of seq.evaluate(r.prompt, { temperature: 0 })) {
      if (out.length === 0) ttft[i] = performance.now() - t0;
      out.push(tok);
      if (out.length >= r.max_new) break;
    }
    generated[i] = out;
  }
  seq.dispose();
}

const t0 = performance.now();
await Promise.all(Array.from({ length: args.streams }, () => client()));
const seconds = (performance.now() - t0) / 1000;
const total = generated.reduce((n, g) => n + g.length, 0);
fs.writeFileSync(outPath, JSON.stringify({ tokens_per_s: total / seconds, ttft_ms: ttft, generated, seconds,
                                           threads: context.currentThreads }));
await context.dispose();
await model.dispose();
await llama.dispose();

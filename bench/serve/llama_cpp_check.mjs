// llama_cpp_check.mjs: loads a GGUF file that `lathe export` wrote into
// llama.cpp (through node-llama-cpp's prebuilt CPU build) and generates
// greedily from prompts given as token ids, printing one JSON line per
// prompt: {"prompt":[ids],"tokens":[ids]}. Compared against
// `lathe generate --ids ...` (docs/export.md); the serving benchmark reuses
// it. An argument "text:SOME TEXT" is instead encoded by llama.cpp's
// tokenizer from the file (special tokens recognised, nothing added):
// {"text":"...","ids":[ids]}, to compare with `lathe tokenize`.
// The KV cache is F32, as lathe's is; LLAMA_CPP_KV_TYPE=F16 gives
// llama.cpp's default.
// Not part of CI: it needs node-llama-cpp from npm.
//
// usage: NODE_PATH=/tmp/nlc/node_modules node bench/serve/llama_cpp_check.mjs \
//          MODEL.gguf MAX_NEW "1 2 3" ["4 5" ...] ["text:Hello world" ...]
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), "x"));
const { getLlama, LlamaLogLevel } = await import(require.resolve("node-llama-cpp"));

const [modelPath, maxNewArg, ...prompts] = process.argv.slice(2);
if (!modelPath || !maxNewArg || prompts.length === 0) {
    console.error('usage: node llama_cpp_check.mjs MODEL.gguf MAX_NEW "1 2 3" ["4 5" ...]');
    process.exit(2);
}
const maxNew = Number(maxNewArg);
const kvType = process.env.LLAMA_CPP_KV_TYPE || "F32";

const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
for (const p of prompts) {
    if (p.startsWith("text:")) {
        const text = p.slice(5);
        console.log(JSON.stringify({ text, ids: Array.from(model.tokenize(text, true), Number) }));
        continue;
    }
    const ids = p.split(/[\s,]+/).filter((s) => s.length > 0).map(Number);
    const context = await model.createContext({
        contextSize: 256,
        threads: 1,
        experimentalKvCacheKeyType: kvType,
        experimentalKvCacheValueType: kvType,
    });
    const seq = context.getSequence();
    const out = [];
    for await (const t of seq.evaluate(ids, { temperature: 0 })) {
        out.push(Number(t));
        if (out.length >= maxNew) break;
    }
    console.log(JSON.stringify({ prompt: ids, tokens: out }));
    await context.dispose();
}
await model.dispose();

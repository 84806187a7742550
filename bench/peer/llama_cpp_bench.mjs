// llama_cpp_bench.mjs: llama.cpp's side of the end-to-end comparison
// (compare_with_llama_cpp.sh); prints the same JSON fields as vllm_peer_bench.
//
// llama.cpp comes from the npm package node-llama-cpp 3.22.1 (prebuilt llama.cpp CPU
// libraries; nothing of it is in this repository). Install it once in a scratch
// folder outside the repo and pass that folder as --peer-dir:
//   mkdir -p /tmp/llama_peer && cd /tmp/llama_peer && npm i -E node-llama-cpp@3.22.1
//   node bench/peer/llama_cpp_bench.mjs --peer-dir /tmp/llama_peer --model FILE.gguf \
//        --prompt-ids 1,2,3 [--max-tokens 64] [--threads 2] [--kv-type F32|F16] [--warmup 1]
//
// Setup: getLlama({gpu: false, build: "never", maxThreads: T}), a context with
// `threads: T`, flash attention off, KV cache K and V of --kv-type (default F32, the
// dtype vllm-cpp's CPU KV cache has; llama.cpp's own default is F16), one sequence.
// Greedy generation with llama.cpp's sampler (temperature 0) through
// sequence.evaluate(): the first token comes after the whole prompt was evaluated
// (prefill = prompt tokens / time to the first token), every later token costs one
// single-token evaluation (decode = (N - 1) / the rest). With --warmup 1 a short
// evaluation (16 prompt tokens, 4 generated) runs first and is cleared, as in
// vllm_peer_bench. Model loading is timed apart (load_s).
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import path from "node:path";

function parseArgs(argv) {
  const o = {peerDir: "/tmp/llama_peer", model: "", promptIds: [], maxTokens: 64, threads: 2, kvType: "F32",
             warmup: true};
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`llama_cpp_bench: ${flag} needs a value`);
    if (flag === "--peer-dir") o.peerDir = value;
    else if (flag === "--model") o.model = value;
    else if (flag === "--prompt-ids") o.promptIds = value.split(",").map(Number);
    else if (flag === "--max-tokens") o.maxTokens = Number(value);
    else if (flag === "--threads") o.threads = Number(value);
    else if (flag === "--kv-type") o.kvType = value;
    else if (flag === "--warmup") o.warmup = value !== "0";
    else throw new Error(`llama_cpp_bench: unknown flag ${flag}`);
  }
  if (!o.model || o.promptIds.length === 0) throw new Error("llama_cpp_bench: --model and --prompt-ids are required");
  if (!(o.maxTokens >= 2)) throw new Error("llama_cpp_bench: --max-tokens must be >= 2");
  return o;
}

async function importPeer(peerDir) {
  const require = createRequire(path.join(path.resolve(peerDir), "package.json"));
  return import(pathToFileURL(require.resolve("node-llama-cpp")).href);
}

// Greedy: the first token after the whole prompt (prefill), then one token per step.
async function runRequest(sequence, promptIds, maxTokens) {
  const ids = [];
  let start = performance.now(), prefillMs = 0;
  for await (const token of sequence.evaluate(promptIds, {temperature: 0})) {
    const now = performance.now();
    if (ids.length === 0) {
      prefillMs = now - start;
      start = now;
    }
    ids.push(token);
    if (ids.length === maxTokens) break;
  }
  const decodeMs = performance.now() - start;
  return {prefillS: prefillMs / 1000, decodeS: decodeMs / 1000, ids};
}

const o = parseArgs(process.argv.slice(2));
const {getLlama, LlamaLogLevel} = await importPeer(o.peerDir);
const llama = await getLlama({gpu: false, build: "never", maxThreads: o.threads, logLevel: LlamaLogLevel.error});
const loadStart = performance.now();
const model = await llama.loadModel({modelPath: o.model});
const context = await model.createContext({
  contextSize: o.promptIds.length + o.maxTokens + 16, threads: o.threads, flashAttention: false,
  experimentalKvCacheKeyType: o.kvType, experimentalKvCacheValueType: o.kvType,
});
const loadS = (performance.now() - loadStart) / 1000;
const sequence = context.getSequence();
if (o.warmup) {
  await runRequest(sequence, o.promptIds.slice(0, 16), 4);
  await sequence.clearHistory();
}
const t = await runRequest(sequence, o.promptIds, o.maxTokens);
console.log(JSON.stringify({
  engine: "llama.cpp", threads: o.threads, kv_cache_dtype: o.kvType.toLowerCase(), load_s: loadS,
  prompt_tokens: o.promptIds.length, prefill_s: t.prefillS, prefill_tok_s: o.promptIds.length / t.prefillS,
  decode_tokens: t.ids.length - 1, decode_s: t.decodeS, decode_tok_s: (t.ids.length - 1) / t.decodeS, ids: t.ids,
}));
await context.dispose();
await model.dispose();

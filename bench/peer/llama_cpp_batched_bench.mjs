// llama_cpp_batched_bench.mjs: llama.cpp's side of the CPU batched-throughput
// comparison, the counterpart of `vllm-cpp bench throughput --num-prompts N
// --input-len P --output-len G` (and of llama-batched-bench -npp P -ntg G -npl N,
// which the npm package does not ship).
//
// llama.cpp comes from node-llama-cpp 3.22.1 (prebuilt CPU libraries, installed
// outside the repo as in llama_cpp_bench.mjs). One context with N sequences; the N
// requests (P random token ids each, seeded, then G greedy tokens, EOS ignored) start
// together, so node-llama-cpp's batcher puts every sequence's next token into one
// llama_decode per step, as a serving engine would. elapsed runs from the start to
// the last request finishing; prints total tokens/s = N (P + G) / elapsed and output
// tokens/s = N G / elapsed, as vllm-cpp's bench throughput does.
//
//   node bench/peer/llama_cpp_batched_bench.mjs --peer-dir /tmp/llama_peer --model FILE.gguf \
//        --num-prompts 8 [--input-len 128] [--output-len 64] [--threads 2] [--kv-type F32|F16] [--seed 0]
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import path from "node:path";

function parseArgs(argv) {
  const o = {peerDir: "/tmp/llama_peer", model: "", numPrompts: 8, inputLen: 128, outputLen: 64, threads: 2,
             kvType: "F32", seed: 0};
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`llama_cpp_batched_bench: ${flag} needs a value`);
    if (flag === "--peer-dir") o.peerDir = value;
    else if (flag === "--model") o.model = value;
    else if (flag === "--num-prompts") o.numPrompts = Number(value);
    else if (flag === "--input-len") o.inputLen = Number(value);
    else if (flag === "--output-len") o.outputLen = Number(value);
    else if (flag === "--threads") o.threads = Number(value);
    else if (flag === "--kv-type") o.kvType = value;
    else if (flag === "--seed") o.seed = Number(value);
    else throw new Error(`llama_cpp_batched_bench: unknown flag ${flag}`);
  }
  if (!o.model) throw new Error("llama_cpp_batched_bench: --model is required");
  return o;
}

// A small seeded generator (mulberry32), so every run sends the same prompts.
function randomIds(count, seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Array.from({length: count}, () => Math.floor(next() * 248320));
}

async function generate(sequence, ids, outputLen) {
  let n = 0;
  for await (const token of sequence.evaluate(ids, {temperature: 0})) {
    void token;
    if (++n === outputLen) break;
  }
  return n;
}

const o = parseArgs(process.argv.slice(2));
const require = createRequire(path.join(path.resolve(o.peerDir), "package.json"));
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(require.resolve("node-llama-cpp")).href);
const llama = await getLlama({gpu: false, build: "never", maxThreads: o.threads, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: o.model});
const context = await model.createContext({
  contextSize: o.numPrompts * (o.inputLen + o.outputLen + 16), sequences: o.numPrompts, threads: o.threads,
  batchSize: Math.max(512, o.numPrompts), flashAttention: false,
  experimentalKvCacheKeyType: o.kvType, experimentalKvCacheValueType: o.kvType,
});
const sequences = Array.from({length: o.numPrompts}, () => context.getSequence());
await generate(sequences[0], randomIds(16, 1000 + o.seed), 4);  // warm-up, as vllm-cpp's bench
await sequences[0].clearHistory();
const start = performance.now();
const generated = await Promise.all(
    sequences.map((s, r) => generate(s, randomIds(o.inputLen, o.seed * 100003 + r), o.outputLen)));
const elapsedS = (performance.now() - start) / 1000;
const outputTokens = generated.reduce((a, b) => a + b, 0);
console.log(JSON.stringify({
  engine: "llama.cpp", threads: o.threads, num_prompts: o.numPrompts, input_len: o.inputLen, output_len: o.outputLen,
  elapsed_s: elapsedS, total_tokens_per_s: (o.numPrompts * o.inputLen + outputTokens) / elapsedS,
  output_tokens_per_s: outputTokens / elapsedS,
}));
await context.dispose();
await model.dispose();

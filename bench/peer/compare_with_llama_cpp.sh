#!/usr/bin/env bash
# End-to-end CPU comparison of vllm-cpp and llama.cpp on the same GGUF: prefill and
# decode tokens/s, medians over repeats, and the greedy agreement of the two engines.
#
# Builds nothing. Needs, built beforehand (see bench/peer/README.md):
#   cmake -S . -B build-peer -G Ninja -DVT_CUDA=OFF -DVT_ROCM=OFF -DCMAKE_BUILD_TYPE=Release
#   ninja -C build-peer random_gguf vllm_peer_bench
# and llama.cpp through npm in a scratch folder (never in the repo):
#   mkdir -p /tmp/llama_peer && (cd /tmp/llama_peer && npm i -E node-llama-cpp@3.22.1)
#
# Usage: bench/peer/compare_with_llama_cpp.sh [--build DIR] [--peer-dir DIR] [--model FILE.gguf]
#          [--shape 0.8b|2b|9b|35b-a3b] [--outtype q8_0|q4_k|f16|bf16|...] [--repeats R] [--prompt-len P]
#          [--gen N] [--threads T] [--seed S] [--kv-type F32|F16] [--keep DIR]
# The model file is written by random_gguf when missing (default
# /tmp/vllm_peer_qwen35_<shape>_<outtype>.gguf). Engines run alternately, the order
# swapped every repeat; each run is a fresh process (model load timed apart).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-peer" peer_dir=/tmp/llama_peer model="" shape=0.8b outtype=q8_0
repeats=3 prompt_len=128 gen=64 threads=2 seed=0 kv_type=F32 keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2 ;; --peer-dir) peer_dir=$2 ;; --model) model=$2 ;; --shape) shape=$2 ;;
    --outtype) outtype=$2 ;; --repeats) repeats=$2 ;; --prompt-len) prompt_len=$2 ;; --gen) gen=$2 ;;
    --threads) threads=$2 ;; --seed) seed=$2 ;; --kv-type) kv_type=$2 ;; --keep) keep=$2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
model=${model:-/tmp/vllm_peer_qwen35_${shape}_${outtype}.gguf}

for bin in random_gguf vllm_peer_bench; do
  [[ -x "$build/bin/$bin" ]] || { echo "missing $build/bin/$bin: ninja -C $build random_gguf vllm_peer_bench" >&2; exit 1; }
done
[[ -d "$peer_dir/node_modules/node-llama-cpp" ]] ||
  { echo "missing node-llama-cpp in $peer_dir: (cd $peer_dir && npm i -E node-llama-cpp@3.22.1)" >&2; exit 1; }
if [[ ! -f "$model" ]]; then
  "$build/bin/random_gguf" --out "$model" --shape "$shape" --outtype "$outtype"
fi

# P token ids drawn uniformly from the 248320-token vocabulary with a fixed seed.
ids=$(python3 -c "import random; r = random.Random($seed); print(','.join(str(r.randrange(248320)) for _ in range($prompt_len)))")

results=${keep:-$(mktemp -d)}
mkdir -p "$results"
: > "$results/runs.jsonl"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model ($(du -h "$model" | cut -f1)); prompt $prompt_len ids (seed $seed), $gen generated, $threads threads, llama.cpp KV $kv_type"

run_vllm() {
  "$build/bin/vllm_peer_bench" --model "$model" --prompt-ids "$ids" --max-tokens "$gen" --threads "$threads" |
    tail -n1 >> "$results/runs.jsonl"
}
run_llama() {
  node "$here/llama_cpp_bench.mjs" --peer-dir "$peer_dir" --model "$model" --prompt-ids "$ids" \
    --max-tokens "$gen" --threads "$threads" --kv-type "$kv_type" | tail -n1 >> "$results/runs.jsonl"
}
for ((r = 1; r <= repeats; r++)); do
  if ((r % 2)); then run_vllm; run_llama; else run_llama; run_vllm; fi
  echo "repeat $r/$repeats done (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/summarize_runs.py" "$results/runs.jsonl"
[[ -n "$keep" ]] || rm -rf "$results"

#!/usr/bin/env bash
# vllm-cpp against llama.cpp on the GPU machine, same random-weight GGUF, same call:
# the ratio table of bench/README.md.
#
#   bench/peer/gpu_compare.sh [--models 9b-q8_0,9b-bf16,35b-a3b-q8_0] [--tests] [--model-tests]
#                             [--profile-prefill] [--launch-ab] [--ncu] [--ncu-batches 1,256]
#                             [--ncu-prefill] [--ncu-prefill-len N] [--ncu-stalls] [--prefix-cache] [--no-kernel-bench]
#                             [--kernel-bench-only TEXT] [--no-peer]
#                             [--no-bench] [--structured MODEL:TOKENIZER_DIR] [--mtp]
#                             [--sanitize GTEST_FILTER] [--test-filter F] [--model-test-filter F]
#                             [--prompts 16,64,256] [--long-prompt N] [--sampled] [--budget S]
# (--no-peer: no llama.cpp build or runs; --no-bench: no vllm-cpp benches, e.g. for
# a call that only profiles)
#
# Stages, each under the call's deadline (--budget seconds from the start, 560 by
# default: the device tool gives a call 600 s), later ones skipped when time runs out:
#   1. llama.cpp v0.5.0 (.gpu_carry/llama_src.tar.xz: node-llama-cpp 3.22.1's source
#      bundle with its patch, trimmed) built with CUDA for sm_90 in the background
#      (llama-bench, llama-batched-bench; ~5 min on 16 cores); never committed.
#   2. vllm-cpp built with CUDA (tools/gpu/gpu_build_env.sh; vllm-cpp, random_gguf,
#      vt_gpu_bench, and vt_tests with --tests), then with --tests the MatMul /
#      MoeExperts contract tests on cuda:0 (with --model-tests also the reference
#      models, decode graphs and hybrid prefix cache of vllm_tests on cuda:0; with
#      --sanitize F, compute-sanitizer's memcheck (and racecheck when more than 400 s
#      are left) over the vt tests matching F, e.g. a new kernel's contract test;
#      --test-filter / --model-test-filter replace the two test filters), and vt_gpu_bench
#      (kernels against the copy bandwidth) when time allows (--kernel-bench-only TEXT:
#      only its rows whose call contains one of the comma-separated texts, e.g.
#      GdnDecode,dequantize). With --launch-ab: the
#      9B-shape bf16 batch-1 decode (gpu_decode_bench, 512-token prompt) with
#      programmatic launch (the default) and without (launch=serialized), graphs and
#      eager, in one process.
#   3. With --ncu-stalls: Nsight Compute's occupancy, scheduler and warp-stall sections
#      for one launch each of the int8 kernels of vt_gpu_bench (the pipelined tiles at
#      16 rows, the GEMV at 1 row; Q8_0 24576 x 4096), summarized in the log.
#      With --ncu-prefill: per-kernel device times (Nsight Compute) of one eager 2048-token
#      (--ncu-prefill-len N: N-token) prefill of the 9B shape in bf16 (gpu_decode_bench --mode profile); with
#      --profile-prefill that prefill and 2048-context decode timed under every
#      forced PagedAttention / GDN variant (gpu_decode_bench --variants).
#   4. For each model: random_gguf writes the GGUF (shape and weight format from the
#      name), then `vllm-cpp bench latency` (512 in / 128 out, batch 1; and 2048 in for
#      prefill), `vllm-cpp bench throughput` (16, 64, 256 prompts of 256 in / 128 out, or
#      --prompts), with --long-prompt N also an N-token prefill (one run each side),
#      (with --ncu, the kernel times of one decode step at each --ncu-batches size
#      (1,16 by default) under
#      Nsight Compute, captured alone by --profile-decode-step), then llama-bench (pp512, pp2048, tg128, flash
#      attention on) and llama-batched-bench (npp 256, ntg 128, npl 16,64,256) on the
#      same file, which is deleted afterwards (the disk holds one large model at a time).
#      With --prefix-cache, for the first model: hybrid prefix caching through the
#      server, cache on and off (tools/gpu/prefix_cache_turns.sh).
#      With --structured MODEL:DIR (DIR: a folder with tokenizer.json, or a .tar.xz of
#      one, relative to the repository, e.g. carried in .gpu_carry), MODEL's GGUF carries that tokenizer
#      and `vllm-cpp bench throughput` at 64 prompts runs unconstrained, with a regex
#      and with a JSON schema on every request, alternating (what the token masks cost
#      on the GPU, docs/structured_output.md).
#      With --sampled, every model's batch-1 decode and 64 prompts also run at temperature
#      1.0 (vLLM's benchmark_throughput setting; vt::Sample on the device, graphs
#      replayed), to set against the greedy runs of the same call.
#      With --mtp, MTP speculative decoding: first the embedded demo model (a trained
#      head) at batch 1 for k = 0, 1, 2, 3, twice, alternating; then every model's GGUF
#      carries a random MTP module, and after its benchmarks a batch-1 run with k = 1
#      (random drafts are rejected: what verification costs) and 64 prompts with k = 1
#      and disable_by_batch_size 16.
#   5. gpu_ratio_table.py prints the table (also $OUT/table.md).
# Builds live in /tmp and are reused when the machine is still warm from a previous
# call. Results (JSON) and logs are written to a work folder and packed at the end
# into $OUT/results.tar.gz (the device tool brings back at most 8 files), with the
# table as $OUT/table.md.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
final_out=${OUT:-/tmp/gpu_compare}
out=/tmp/gpu_compare_work
rm -rf "$out"
mkdir -p "$out" "$final_out"
pack() { tar czf "$final_out/results.tar.gz" -C "$out" . 2>/dev/null; cp "$out/table.md" "$final_out/" 2>/dev/null; }
trap pack EXIT
models=9b-q8_0,9b-bf16
run_tests=0
model_tests=0
launch_ab=0
ncu_batches=1,16
profile_prefill=0
ncu_profiles=0
ncu_prefill=0
ncu_prefill_len=2048
ncu_stalls=0
prefix_cache=0
kernel_bench=1
kernel_bench_only=
with_peer=1
with_bench=1
structured_model=
mtp=0
sampled=0
structured_tokenizer=
sanitize_filter=
test_filter='MatMulTest.*:MoeExpertsTest.*:MoeRouterTest.*:DeviceGraphTest.*:MatMulChoiceTest.*:GpuKernelRoutesTest.*:MatMulSkinnyVariantsTest.*:GdnTest.*:GdnRecurrentVariantsTest.*:GdnDecodeTest.*:CausalConv1d*:PagedAttention*:*RmsNormTest.*:L2NormTest.*:ProgrammaticLaunchTest.*:AddTest.*:CopyTest.*:FillTest.*:GatherRowsTest.*:RopeNeoxTest.*:AttnGateSplitTest.*:LogSoftmaxTest.*:ArgmaxTest.*:SampleTest.*:SiluMulTest.*:SigmoidMulTest.*:GdnGatesTest.*:WriteKvCacheTest.*:GpuDeviceTest.*:GpuBackendTest.*:MemoryStatsTest.*'
model_test_filter='*/HfReferenceTest.*:*/Bf16DeviceReferenceTest.*:*/DecodeGraphEngineTest.*:DecodeGraphsTest.*:*HybridPrefixCacheTest.*'
prompts=16,64,256
long_prompt=
budget=560
while [ $# -gt 0 ]; do
  case $1 in
    --models) models=$2; shift 2 ;;
    --tests) run_tests=1; shift ;;
    --model-tests) run_tests=1; model_tests=1; shift ;;
    --launch-ab) launch_ab=1; shift ;;
    --ncu-batches) ncu_batches=$2; shift 2 ;;
    --profile-prefill) profile_prefill=1; shift ;;
    --ncu) ncu_profiles=1; shift ;;
    --ncu-prefill) ncu_prefill=1; shift ;;
    --ncu-prefill-len) ncu_prefill_len=$2; shift 2 ;;
    --ncu-stalls) ncu_stalls=1; shift ;;
    --prefix-cache) prefix_cache=1; shift ;;
    --no-peer) with_peer=0; shift ;;
    --no-bench) with_bench=0; shift ;;
    --no-kernel-bench) kernel_bench=0; shift ;;
    --kernel-bench-only) kernel_bench_only=$2; shift 2 ;;
    --structured) structured_model=${2%%:*}; structured_tokenizer=$repo/${2#*:}; shift 2 ;;
    --mtp) mtp=1; shift ;;
    --sampled) sampled=1; shift ;;
    --sanitize) sanitize_filter=$2; run_tests=1; shift 2 ;;
    --test-filter) test_filter=$2; shift 2 ;;
    --model-test-filter) model_test_filter=$2; shift 2 ;;
    --prompts) prompts=$2; shift 2 ;;
    --long-prompt) long_prompt=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "gpu_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
started=$(date +%s)
deadline=$(( started + budget ))
left() { echo $(( deadline - $(date +%s) )); }
stage() { echo; echo "=== $* ($(( $(date +%s) - started )) s)"; }
jobs=$(nproc)
build=/tmp/vllm_gpu_build
llama_src=/tmp/llama_src
llama_build=/tmp/llama_build
source "$repo/tools/gpu/gpu_build_env.sh"

if [[ "$structured_tokenizer" == *.tar.xz ]]; then  # carried packed: the call's tree has a size limit
  rm -rf /tmp/structured_tokenizer && mkdir -p /tmp/structured_tokenizer &&
    tar xJf "$structured_tokenizer" -C /tmp/structured_tokenizer
  structured_tokenizer=/tmp/structured_tokenizer
fi

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv
"$gpu_nvcc" --version | tail -1
df -h /tmp | tail -1
echo "cores: $jobs, models: $models"

stage "llama.cpp v0.5.0: CUDA build in the background"
llama_bin=$llama_build/bin
if [ $with_peer = 0 ]; then
  echo "skipped (--no-peer)"
  llama_pid=
elif [ -x "$llama_bin/llama-bench" ] && [ -x "$llama_bin/llama-batched-bench" ]; then
  echo "already built (warm machine)"
  llama_pid=
else
  (
    rm -rf "$llama_src" && mkdir -p "$llama_src" && tar xf "$gpu_carry/llama_src.tar.xz" -C "$llama_src" &&
      cmake -S "$llama_src" -B "$llama_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$gpu_nvcc" -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
        -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF &&
      nice -n 5 ninja -C "$llama_build" -j"$jobs" llama-bench llama-batched-bench
  ) >"$out/llama_build.log" 2>&1 &
  llama_pid=$!
fi

stage "vllm-cpp: CUDA build"
gpu_env_setup
targets=(vllm-cpp random_gguf vt_gpu_bench)
{ [ $profile_prefill = 1 ] || [ $launch_ab = 1 ] || [ $ncu_prefill = 1 ]; } && targets+=(gpu_decode_bench)
[ $run_tests = 1 ] && targets+=(vt_tests)
[ $model_tests = 1 ] && targets+=(vllm_tests)
[ $run_tests = 1 ] && gpu_build_googletest "$build-gtest"
if [ $run_tests = 1 ] || [ ! -f "$build/build.ninja" ]; then
  gpu_configure "$build" -DVT_BUILD_TESTS=$([ $run_tests = 1 ] && echo ON || echo OFF) || tail -20 "$out/build.log"
fi
ninja -C "$build" -k 0 -j"$jobs" "${targets[@]}" vt_cuda >>"$out/build.log" 2>&1 || {
  grep -E "error|FAILED" "$out/build.log" | head -30
  echo "vllm-cpp build FAILED"
}
bin=$build/bin
if [ -x "$bin/vllm-cpp" ] && ! "$bin/vllm-cpp" --help >/dev/null 2>"$out/vllm_start.err"; then
  echo "vllm-cpp does not start here ($(head -1 "$out/vllm_start.err")): rebuilding without the server"
  gpu_configure "$build" -DVT_BUILD_SERVER=OFF >>"$out/build.log" 2>&1
  ninja -C "$build" -j"$jobs" vllm-cpp >>"$out/build.log" 2>&1 || echo "vllm-cpp rebuild FAILED"
fi
"$bin/vllm-cpp" serve --help >/dev/null 2>&1 && echo "OpenAI server built" || echo "OpenAI server not built"

if [ $run_tests = 1 ] && [ -x "$bin/vt_tests" ]; then
  stage "contract tests on cuda:0: every op with a GPU kernel, the kernel choices and variants, programmatic launch"
  timeout $(( $(left) > 120 ? 120 : $(left) )) "$bin/vt_tests" \
    --gtest_filter="$test_filter" \
    >"$out/tests.log" 2>&1
  echo "rc $?"
  grep -E "^\[  FAILED  \]|Failure" "$out/tests.log" | head -20
  tail -3 "$out/tests.log"
fi
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$sanitize_filter" ] && [ -n "$sanitizer" ] && [ -x "$bin/vt_tests" ]; then
  stage "compute-sanitizer memcheck and racecheck: $sanitize_filter"
  for tool in memcheck racecheck; do
    [ $tool = racecheck ] && [ "$(left)" -lt 400 ] && { echo "racecheck skipped: $(left) s left"; continue; }
    timeout $(( $(left) > 180 ? 60 : $(left) / 3 )) "$sanitizer" --tool $tool --error-exitcode 99 --print-limit 20 \
      "$bin/vt_tests" --gtest_filter="$sanitize_filter" >"$out/sanitizer_$tool.log" 2>&1
    echo "$tool rc $? (99: errors found, 124: timed out)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|\[  FAILED  \]" "$out/sanitizer_$tool.log" | head -10
  done
fi
if [ $model_tests = 1 ] && [ -x "$bin/vllm_tests" ]; then
  stage "reference models on cuda:0 (f32 at the CPU tolerance, bf16 bounds, decode graphs against eager)"
  timeout $(( $(left) > 200 ? 120 : $(left) / 2 )) "$bin/vllm_tests" \
    --gtest_filter="$model_test_filter" \
    >"$out/vllm_tests.log" 2>&1
  echo "rc $?"
  grep -E "^\[  FAILED  \]|Failure" "$out/vllm_tests.log" | head -20
  tail -3 "$out/vllm_tests.log"
fi
if [ $launch_ab = 1 ] && [ -x "$bin/gpu_decode_bench" ] && [ "$(left)" -gt 150 ]; then
  stage "9B bf16 batch-1 decode: programmatic launch against serialized launches (gpu_decode_bench)"
  # "default" first and last: the spread between the two is the noise.
  timeout $(( $(left) > 200 ? 140 : $(left) - 60 )) "$bin/gpu_decode_bench" --device cuda:0 --shape 9b \
    --prompt-len 512 --steps 64 --variants "default,launch=serialized,eager,eager+launch=serialized,default" \
    >"$out/launch_ab.log" 2>&1
  echo "rc $?"
  sed -n '/^summary/,$p' "$out/launch_ab.log" | head -30
fi

if [ $kernel_bench = 1 ] && [ -x "$bin/vt_gpu_bench" ] && [ "$(left)" -gt $([ -n "$kernel_bench_only" ] && echo 60 || echo 300) ]; then
  stage "kernels against the copy bandwidth (vt_gpu_bench${kernel_bench_only:+ --only $kernel_bench_only})"
  timeout 150 "$bin/vt_gpu_bench" ${kernel_bench_only:+--only "$kernel_bench_only"} >"$out/vt_gpu_bench.log" 2>&1
  echo "rc $?"
  cat "$out/vt_gpu_bench.log"
fi

ncu_bin=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $ncu_stalls = 1 ] && [ -n "$ncu_bin" ] && [ -x "$bin/vt_gpu_bench" ] && [ "$(left)" -gt 240 ]; then
  stage "warp stalls of the int8 kernels (Nsight Compute, vt_gpu_bench launches)"
  # Launch numbers follow vt_gpu_bench's rows: the staged GEMV's first row is Q8_0
  # 24576 x 4096 at M = 1; the pipelined tiles run 5 rows of 253 launches before M = 16.
  for spec in "QuantGemvStagedKernel 10" "QuantMmaPipelinedKernel 1300"; do
    set -- $spec
    timeout 120 "$ncu_bin" --clock-control none -k "regex:$1" --launch-skip "$2" -c 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
      "$bin/vt_gpu_bench" >"$out/ncu_stalls_$1.txt" 2>&1
    echo "--- $1 (rc $?)"
    grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issued Ipc|Eligible Warps|No Eligible|Executed Instructions  |stalled|Shared Memory Configuration Size|Dynamic Shared" \
      "$out/ncu_stalls_$1.txt" | head -40
  done
fi
if [ $ncu_prefill = 1 ] && [ -n "$ncu_bin" ] && [ -x "$bin/gpu_decode_bench" ] && [ "$(left)" -gt 200 ]; then
  stage "kernel times of one $ncu_prefill_len-token 9B bf16 prefill (Nsight Compute)"
  timeout $(( $(left) - 20 )) "$ncu_bin" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv "$bin/gpu_decode_bench" --device cuda:0 --shape 9b --prompt-len "$ncu_prefill_len" --mode profile \
    >"$out/ncu_prefill.csv" 2>"$out/ncu_prefill.err"
  echo "rc $?"
  python3 "$repo/tools/gpu/kernel_times.py" "$out/ncu_prefill.csv" --prefill | tee "$out/prefill_kernels.txt" | head -30
fi
if [ $profile_prefill = 1 ] && [ -x "$bin/gpu_decode_bench" ] && [ "$(left)" -gt 200 ]; then
  # The first variant's prefill also pays the process's one-time costs (cuBLAS, the
  # first launches): "eager" runs first as the warm-up and is not compared.
  stage "2048-token 9B bf16 prefill and decode at 2048 context: the default kernels against forced variants"
  timeout $(( $(left) - 20 )) "$bin/gpu_decode_bench" --device cuda:0 --shape 9b --prompt-len 2048 --steps 8 \
    --variants "eager,default,gdn=warp_columns,default" \
    >"$out/prefill_variants.log" 2>&1
  echo "rc $?"
  grep -E "^\[|prefill of" "$out/prefill_variants.log" | paste - - | head -20
  sed -n '/^summary/,$p' "$out/prefill_variants.log" | head -30
fi

# shape and --outtype of random_gguf from a model name ("9b-q8_0" -> 9b q8_0).
model_shape() { echo "${1%-*}"; }
model_type() { echo "${1##*-}"; }

wait_for_llama() {
  [ -z "$llama_pid" ] && return 0
  echo "waiting for the llama.cpp build ($(left) s left)"
  while kill -0 "$llama_pid" 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
  if kill -0 "$llama_pid" 2>/dev/null; then
    echo "llama.cpp build not done in time: $(tail -1 "$out/llama_build.log")"
    return 1
  fi
  wait "$llama_pid"
  llama_pid=
  [ -x "$llama_bin/llama-bench" ] || { tail -20 "$out/llama_build.log"; return 1; }
}

ours() {  # name, suffix, seconds at most, bench args...
  local name=$1 suffix=$2 cap=$3
  shift 3
  local t=$(( $(left) - 30 ))
  [ $t -gt $cap ] && t=$cap
  [ $t -lt 10 ] && { echo "skipped $name $suffix: no time left"; return; }
  echo "--- vllm-cpp bench $* ($t s at most)"
  timeout $t "$bin/vllm-cpp" bench "$@" --device cuda --output-json "$out/$name.$suffix.json" \
    >>"$out/$name.vllm.log" 2>&1
  echo "rc $?; $(tail -3 "$out/$name.vllm.log")"
}

spec() { echo "{\"method\": \"mtp\", \"num_speculative_tokens\": $1${2:+, \"disable_by_batch_size\": $2}}"; }
if [ $mtp = 1 ]; then
  stage "MTP speculative decoding on the demo model (batch 1, k = 0..3, twice)"
  for round in 1 2; do
    for k in 0 1 2 3; do
      args=(); [ $k -gt 0 ] && args=(--speculative-config "$(spec $k)")
      ours demo "mtp_k$k.$round" 40 latency --model vllm-cpp/demo --input-len 64 --output-len 256 --batch-size 1 \
        --num-iters 3 --num-iters-warmup 1 "${args[@]}"
    done
  done
fi

for name in ${models//,/ }; do
  stage "$name: write the GGUF"
  file=/tmp/peer_$name.gguf
  if [ "$(left)" -lt 90 ]; then echo "skipped: $(left) s left"; break; fi
  tokenizer_args=()
  [ "$name" = "$structured_model" ] && tokenizer_args=(--tokenizer "$structured_tokenizer")
  [ $mtp = 1 ] && tokenizer_args+=(--mtp)
  timeout $(( $(left) - 60 )) "$bin/random_gguf" --shape "$(model_shape "$name")" --outtype "$(model_type "$name")" \
    --threads "$jobs" --out "$file" "${tokenizer_args[@]}" >"$out/$name.write.log" 2>&1
  echo "rc $?: $(tail -1 "$out/$name.write.log")"; ls -la "$file" 2>/dev/null || continue

  stage "$name: vllm-cpp bench"
  if [ $with_bench = 1 ]; then
  ours "$name" latency 120 latency --model "$file" --input-len 512 --output-len 128 --batch-size 1 --num-iters 3 \
    --num-iters-warmup 1 --print-kernels
  ours "$name" prefill2048 60 latency --model "$file" --input-len 2048 --output-len 2 --batch-size 1 --num-iters 3 \
    --num-iters-warmup 1
  if [ -n "$long_prompt" ]; then
    ours "$name" prefill_long 120 latency --model "$file" --input-len "$long_prompt" --output-len 2 --batch-size 1 \
      --num-iters 1 --num-iters-warmup 1 --max-model-len $(( long_prompt + 16 ))
  fi
  ours "$name" throughput 200 throughput --model "$file" --num-prompts "$prompts" --input-len 256 --output-len 128 \
    --max-model-len 512
  fi

  if [ $sampled = 1 ] && [ $with_bench = 1 ] && [ "$(left)" -gt 120 ]; then
    stage "$name: sampled at temperature 1.0 (batch 1, 64 prompts)"
    ours "$name" sampled_latency 90 latency --model "$file" --input-len 512 --output-len 128 --batch-size 1 \
      --num-iters 3 --num-iters-warmup 1 --temperature 1.0 --print-kernels
    ours "$name" sampled_throughput 120 throughput --model "$file" --num-prompts 64 --input-len 256 \
      --output-len 128 --max-model-len 512 --temperature 1.0
  fi

  if [ $mtp = 1 ] && [ "$(left)" -gt 120 ]; then
    stage "$name: MTP verification cost (random head, k = 1) at batch 1 and 64 prompts"
    ours "$name" mtp_latency 90 latency --model "$file" --input-len 512 --output-len 128 --batch-size 1 --num-iters 3 \
      --num-iters-warmup 1 --speculative-config "$(spec 1)"
    ours "$name" mtp_throughput 90 throughput --model "$file" --num-prompts 64 --input-len 256 --output-len 128 \
      --max-model-len 512 --speculative-config "$(spec 1 16)"
  fi

  if [ "$name" = "$structured_model" ] && [ "$(left)" -gt 120 ]; then
    stage "$name: structured outputs at 64 prompts (none, regex, JSON schema; twice)"
    schema='{"json": {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "tags"]}}'
    for round in 1 2; do
      # --print-kernels: the runner paths (decode graph or eager, bitmask in graph) in the log
      ours "$name" so_none$round 60 throughput --model "$file" --num-prompts 64 --input-len 256 --output-len 128 \
        --max-model-len 512 --print-kernels
      ours "$name" so_regex$round 60 throughput --model "$file" --num-prompts 64 --input-len 256 --output-len 128 \
        --max-model-len 512 --print-kernels --structured-outputs '{"regex": "[a-z ]+"}'
      ours "$name" so_json$round 60 throughput --model "$file" --num-prompts 64 --input-len 256 --output-len 128 \
        --max-model-len 512 --print-kernels --structured-outputs "$schema"
    done
    # The JSON requests end early, so their runs have fewer steps at batch 64 (the
    # first ones): each constrained run against the same number of first steps of the
    # unconstrained run of its round (equal context).
    python3 - "$out" "$name" <<'PY'
import json, statistics, sys
out, name = sys.argv[1:]
def steps(kind, round_):
    try:
        d = json.load(open(f"{out}/{name}.so_{kind}{round_}.json"))["results"][0]["decode_at_full_batch"]
        return d["step_ms"]
    except (OSError, KeyError, IndexError, TypeError, ValueError):
        return None
for round_ in (1, 2):
    base = steps("none", round_)
    for kind in ("regex", "json"):
        got = steps(kind, round_)
        if not base or not got:
            continue
        n = min(len(got), len(base))
        a, b = statistics.median(base[:n]), statistics.median(got[:n])
        print(f"round {round_} {kind}: first {n} steps at batch 64, median {b:.3f} ms against {a:.3f} "
              f"unconstrained: cost {100 * (b / a - 1):+.1f}%")
PY
  fi

  if [ $prefix_cache = 1 ] && [ "$(left)" -gt 150 ]; then
    stage "$name: hybrid prefix caching through the server (cache on, off)"
    timeout $(( $(left) > 240 ? 180 : $(left) - 60 )) bash "$repo/tools/gpu/prefix_cache_turns.sh" "$bin/vllm-cpp" "$file" "$out/prefix_cache"
    prefix_cache=0  # the first model only
  fi

  if [ $ncu_profiles = 1 ] && [ -n "$ncu_bin" ]; then
    # One decode step at batch 1 and at 16 (context ~512), captured alone: the bench
    # turns the profiler's capture on only around it (--profile-decode-step), so
    # Nsight Compute replays ~1,000 launches instead of the whole run. The prompts
    # prefill 2048 tokens a step (batch x 512 / 2048 steps), and the output is longer
    # than that, so that no request has finished when the last one starts: the
    # captured step decodes the whole batch (with 8 tokens out, a batch-256 capture
    # ran the last 16 requests only).
    for batch in ${ncu_batches//,/ }; do
      [ "$(left)" -lt 60 ] && { echo "skipped the batch-$batch capture: $(left) s left"; continue; }
      stage "$name: kernel times of one batch-$batch decode step (Nsight Compute)"
      t=$(( $(left) - 20 )); [ $t -gt 120 ] && t=120
      timeout $t "$ncu_bin" --profile-from-start off --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv "$bin/vllm-cpp" bench latency --model "$file" --device cuda \
        --input-len 512 --output-len $(( batch * 512 / 2048 + 16 )) --batch-size $batch --num-iters 1 --num-iters-warmup 0 \
        --profile-decode-step 4 >"$out/$name.ncu$batch.csv" 2>"$out/$name.ncu$batch.err"
      echo "rc $?"
      python3 "$repo/tools/gpu/kernel_times.py" "$out/$name.ncu$batch.csv" --step >"$out/$name.step$batch.txt" 2>&1
      head -40 "$out/$name.step$batch.txt"
    done
  fi

  stage "$name: llama.cpp"
  if [ $with_peer = 1 ] && wait_for_llama; then
    t=$(( $(left) - 20 )); [ $t -gt 90 ] && t=90
    timeout $t "$llama_bin/llama-bench" -m "$file" -ngl 99 -fa 1 -p 512,2048 -n 128 -o jsonl \
      >"$out/$name.llama-bench.jsonl" 2>"$out/$name.llama-bench.err"
    echo "llama-bench rc $?"; cat "$out/$name.llama-bench.jsonl" | cut -c1-200
    if [ -n "$long_prompt" ] && [ "$(left)" -gt 60 ]; then
      t=$(( $(left) - 40 )); [ $t -gt 90 ] && t=90
      timeout $t "$llama_bin/llama-bench" -m "$file" -ngl 99 -fa 1 -p "$long_prompt" -n 0 -r 2 -o jsonl \
        >"$out/$name.llama-long.jsonl" 2>"$out/$name.llama-long.err"
      echo "llama-bench pp$long_prompt rc $?"; cut -c1-200 "$out/$name.llama-long.jsonl"
    fi
    t=$(( $(left) - 15 )); [ $t -gt 150 ] && t=150
    timeout $t "$llama_bin/llama-batched-bench" -m "$file" -ngl 99 -fa on -c 100000 -npp 256 -ntg 128 \
      -npl "$prompts" --output-format jsonl >"$out/$name.batched.jsonl" 2>"$out/$name.batched.err"
    echo "llama-batched-bench rc $?"; grep '^{' "$out/$name.batched.jsonl" | cut -c1-300
  fi
  rm -f "$file"
done

stage "ratio table"
python3 "$repo/bench/peer/gpu_ratio_table.py" "$out" ${models//,/ } | tee "$out/table.md"

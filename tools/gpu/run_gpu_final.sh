#!/usr/bin/env bash
# Issue 7's final GPU run, in one call of the device tool on the lent H200: the
# engine built with CUDA, the op tests, the reference models on CUDA, `vllm-cpp
# generate --device cuda`, and the 9B-shape batch-1 decode benchmark.
#
#   versions -> googletest and the engine's packages from .gpu_carry -> configure
#   (CUDA, engine, no server) -> build (all cores) -> MatMul variant test -> 9B decode
#   benchmark -> every vt test -> reference-model tests -> generate cpu vs cuda ->
#   compute-sanitizer on the new kernels (then op tests) if time is left -> summary.
#
# Every stage runs under `timeout` within one overall deadline and the script goes
# on when a stage fails; the summary printed last says what passed, what failed and
# where its log is. Logs go to $OUT (the device tool's output folder; /tmp/vt_gpu_final
# elsewhere): build.log variants.log bench.log vt_tests.log models.log generate.log
# sanitizer.log summary.txt (the device tool brings back at most 8 files).
#
# The packages and googletest come from .gpu_carry (tools/gpu/gpu_build_env.sh says
# what it holds and how to make it).
#
# Usage (from the repository root):
#   tools/gpu/run_gpu_final.sh                       on the GPU machine
#   tools/gpu/run_gpu_final.sh --bench-only          there: build, benchmark, kernel times
#   tools/gpu/run_gpu_final.sh --cpu-check DIR       here: the same stages without CUDA
#     (build in DIR, system packages hidden from pkg-config, the benchmark on the
#     CPU at small shapes), to check the script and the carried packages.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cpu_check=0
bench_only=0
build=/tmp/vt_gpu_final_build
if [ "${1:-}" = "--cpu-check" ]; then
  cpu_check=1
  build=${2:?--cpu-check needs a build folder}
elif [ "${1:-}" = "--bench-only" ]; then
  bench_only=1  # build, the decode benchmark and its kernel times; no test stages
fi
out=${OUT:-/tmp/vt_gpu_final}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
jobs=$(nproc)
started=$(date +%s)
deadline=$(( started + 420 ))  # the call is given 480 s; leave time for the summary
scale=1
if [ $cpu_check = 1 ]; then  # a 2-core machine builds for a long time
  deadline=$(( started + 7200 ))
  scale=20
fi
note() { echo "$*" | tee -a "$summary" >/dev/null; }
stage() { echo; echo "=== $* ($(( $(date +%s) - started )) s)"; }
# Seconds a stage may take: its own cap, never past the deadline minus `reserve`
# (what the later stages need at least).
budget() {
  local cap=$(( $1 * scale )) reserve=$2 left
  left=$(( deadline - $(date +%s) - reserve ))
  [ "$left" -lt "$cap" ] && cap=$left
  [ "$cap" -lt 5 ] && cap=5
  echo "$cap"
}
verdict() {  # rc -> words
  case $1 in
    0) echo "passed" ;;
    124|137) echo "TIMED OUT" ;;
    *) echo "FAILED (rc $1)" ;;
  esac
}
gtest_counts() {  # log -> "N passed, M failed"
  echo "$(grep -cE '^\[       OK \]' "$1") passed, $(grep -E '^\[  FAILED  \] [A-Za-z].*\(' "$1" | sort -u | wc -l) failed"
}

source "$repo/tools/gpu/gpu_build_env.sh"

stage "versions"
if [ $cpu_check = 0 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv
  "$gpu_nvcc" --version | tail -2
fi
cmake --version | head -1
g++ --version | head -1
echo "cores: $jobs"

stage "packages carried in .gpu_carry"
gpu_env_setup
if [ $cpu_check = 1 ]; then
  # Only the carried .pc files are seen (PKG_CONFIG_LIBDIR), so this checks the carry.
  echo "pkg-config: $gpu_pkg_config"
fi

stage "googletest"
if gpu_build_googletest "$build-gtest"; then
  echo "googletest built in $build-gtest"
else
  tail -20 "$out/build.log"
  note "googletest: FAILED (build.log); nothing can be tested"
fi

stage "configure (CUDA, engine without the server, Release)"
configured=0
cpu_flags=()
[ $cpu_check = 1 ] && cpu_flags=(-DVT_CUDA=OFF)
# Google Benchmark is not on the machine: the CPU microbenchmarks stay out.
if gpu_configure "$build" -DVT_BUILD_BENCH=OFF "${cpu_flags[@]}"; then
  configured=1
  grep -E "backends built|OpenAI server|Found (nlohmann|PkgConfig)|Checking for module|Found (libpcre|libutf8)" \
    "$out/build.log" | sed 's/^/  /'
else
  tail -30 "$out/build.log"
  note "configure: FAILED (build.log)"
fi

stage "build (-j$jobs)"
targets=(vt vt_tests vllm vllm_tests vllm-cpp gpu_decode_bench)
[ $bench_only = 1 ] && targets=(vt vllm gpu_decode_bench)
[ $cpu_check = 0 ] && targets+=(vt_cuda)
build_started=$(date +%s)
if [ $configured = 1 ]; then
  # -k 0: a target that fails to compile does not stop the others (the benchmark
  # needs the engine, not the engine's tests).
  timeout "$(budget 330 200)" ninja -C "$build" -k 0 -j"$jobs" "${targets[@]}" >>"$out/build.log" 2>&1
  rc=$?
  [ $rc != 0 ] && grep -E "error|FAILED" "$out/build.log" | head -30
  missing=""
  for t in "${targets[@]}"; do
    case $t in vt|vllm|vt_cuda) ;; *) [ -x "$build/bin/$t" ] || missing="$missing $t" ;; esac
  done
  note "build: $(verdict $rc) in $(( $(date +%s) - build_started )) s; binaries missing:${missing:- none}"
fi
bin="$build/bin"
have() { [ -x "$bin/$1" ]; }
device_flag=cuda:0
[ $cpu_check = 1 ] && device_flag=cpu

stage "the benchmark's forced kernel variants (decode MatMul, GdnRecurrent) and device graphs, on the GPU"
if [ $bench_only = 0 ] && have vt_tests; then
  timeout "$(budget 60 150)" "$bin/vt_tests" \
    --gtest_filter='MatMulSkinnyVariantsTest.*:GdnRecurrentVariantsTest.*:MatMulChoiceTest.*:TuningTest.*:DeviceGraphTest.*' \
    >"$out/variants.log" 2>&1
  rc=$?
  tail -4 "$out/variants.log"
  variants_ok=$([ $rc = 0 ] && echo yes || echo no)
  note "variant tests: $(verdict $rc); $(gtest_counts "$out/variants.log")$(grep -q SKIPPED "$out/variants.log" && echo ' (skipped: no GPU)')"
fi

stage "9B-shape batch-1 decode benchmark"
if have gpu_decode_bench; then
  # "default" runs first and last: the spread between the two is the noise.
  bench_args=(--device "$device_flag" --shape 9b --prompt-len 16 --steps 64
              --variants default,eager,default)
  [ $cpu_check = 1 ] && bench_args=(--device cpu --shape small --prompt-len 16 --steps 8)
  timeout "$(budget 150 110)" "$bin/gpu_decode_bench" "${bench_args[@]}" >"$out/bench.log" 2>&1
  rc=$?
  cat "$out/bench.log"
  note "decode benchmark: $(verdict $rc)"
  sed -n '/^summary/,$p' "$out/bench.log" >>"$summary"
  [ "${variants_ok:-no}" = yes ] || note "  (the variant tests did not all pass: see variants.log before trusting a forced variant's row)"
fi

stage "kernel times of one eager 9B decode step (Nsight Compute)"
ncu_bin=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $cpu_check = 0 ] && [ -n "$ncu_bin" ] && have gpu_decode_bench; then
  # Kernels only (no replay of the whole application): each launch is timed alone,
  # caches left warm, clocks left alone (METHOD.md).
  timeout "$(budget 150 100)" "$ncu_bin" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv "$bin/gpu_decode_bench" --device "$device_flag" --shape 9b \
    --prompt-len 16 --mode profile >/tmp/ncu_decode.csv 2>/tmp/ncu_decode.err
  rc=$?
  { echo; echo "--- ncu: one eager decode step (rc $rc)"; python3 "$repo/tools/gpu/kernel_times.py" /tmp/ncu_decode.csv 2>&1 \
      || tail -5 /tmp/ncu_decode.err; } | tee -a "$out/bench.log"
  [ $bench_only = 1 ] && gzip -c /tmp/ncu_decode.csv >"$out/ncu_decode.csv.gz"
  if [ $bench_only = 1 ]; then
    # Where the decode GEMV's time goes: the first decode layer's gate|up (N 24576)
    # and down (N 4096, K 12288) projections; the prefill's only decode-kernel launch
    # is its LM head, so they are launches 3 and 4 of the kernel.
    { echo; echo "--- ncu: decode GEMV detail (gate|up, then down)"
      timeout "$(budget 90 60)" "$ncu_bin" --clock-control none -k regex:SkinnyLoadsInFlight --launch-skip 3 \
        --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section LaunchStats "$bin/gpu_decode_bench" --device "$device_flag" \
        --shape 9b --prompt-len 16 --mode profile 2>&1 | grep -vE '^==PROF==|^gpu_decode_bench|^  (random|device)'
    } >>"$out/bench.log"
  fi
  note "ncu kernel times: $(verdict $rc) (bench.log)"
else
  note "ncu kernel times: not run (no GPU, ncu or benchmark)"
fi

stage "vt tests (op contract tests on every device incl. cuda:0)"
if [ $bench_only = 0 ] && have vt_tests; then
  timeout "$(budget 150 50)" "$bin/vt_tests" >"$out/vt_tests.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|Failure" "$out/vt_tests.log" | head -20
  tail -3 "$out/vt_tests.log"
  note "vt tests: $(verdict $rc); $(gtest_counts "$out/vt_tests.log")"
fi

stage "reference models on cuda:0 (f32 at the CPU tolerance, bf16 bounds and greedy ties; decode graphs vs eager)"
if [ $bench_only = 0 ] && have vllm_tests; then
  timeout "$(budget 150 15)" "$bin/vllm_tests" \
    --gtest_filter='*/HfReferenceTest.*:*/Bf16DeviceReferenceTest.*:*/DecodeGraphEngineTest.*:DecodeGraphsTest.*' \
    >"$out/models.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|Failure|^\[ bf16" "$out/models.log" | head -40
  tail -3 "$out/models.log"
  # The f32 test also runs the CPU at every ISA level in the same test cases: count
  # the failures whose trace names the GPU apart from the others.
  gpu_failures=$(awk -v dev="$device_flag" '
    /: Failure$/ { if (f) n += c; f = 1; c = 0; next }
    f && index($0, dev) { c = 1 }
    /^\[ +(OK|FAILED|RUN) +\]/ { if (f) n += c; f = 0 }
    END { if (f) n += c; print n + 0 }' "$out/models.log")
  note "reference-model tests: $(verdict $rc); $(gtest_counts "$out/models.log"); $(grep -c ': Failure$' "$out/models.log") failed checks, $gpu_failures of them on $device_flag"
  # The bf16 bounds and greedy near-ties of the GPU runs (the CPU's are in models.log).
  grep -E "^\[ bf16 (tie )?\] [^ ]+ $device_flag[: ]" "$out/models.log" | sed 's/^/  /' >>"$summary"
fi

stage "vllm-cpp generate: cpu vs $device_flag, greedy, f32"
if [ $bench_only = 0 ] && have vllm-cpp; then
  # Reference prompt 1 of the model: HF's greedy continuation (reference.json) has
  # top-1/top-2 margins >= 0.05, so f32 runs on any device must give exactly it.
  model="$repo/tests/data/models/qwen35_dense_untied/hf"
  hf_ids='"token_ids":[105,1,158,42,244,237,308,263,283,24,96,5,116,120,228,5,181,170,228,110,267,112,271,9]'
  gen=(generate --model "$model" --prompt-ids 208,104,104,120,93 --max-tokens 24 --temperature 0 --ignore-eos
       --json --max-model-len 256 --max-num-seqs 4)
  {
    for run in "cpu float32" "$device_flag float32" "$device_flag auto"; do
      set -- $run
      echo "--- --device $1 --dtype $2"
      timeout "$(budget 30 0)" "$bin/vllm-cpp" "${gen[@]}" --device "$1" --dtype "$2" 2>&1
    done
  } >"$out/generate.log" 2>&1
  ids() { sed -n "/^--- --device $1 --dtype $2\$/,/^---/p" "$out/generate.log" | grep -o '"token_ids":\[[0-9,]*\]'; }
  cpu_ids=$(ids cpu float32) dev_ids=$(ids "$device_flag" float32) bf16_ids=$(ids "$device_flag" auto)
  echo "cpu f32:  $cpu_ids"; echo "$device_flag f32: $dev_ids"; echo "$device_flag bf16: $bf16_ids"
  echo "HF:       $hf_ids"
  if [ -n "$cpu_ids" ] && [ "$cpu_ids" = "$dev_ids" ]; then
    note "generate --device $device_flag: greedy ids equal to the CPU's (f32), $([ "$dev_ids" = "$hf_ids" ] && echo "and to HF's" || echo "NOT to HF's"); bf16 (--dtype auto) $([ "$bf16_ids" = "$hf_ids" ] && echo "equal to HF's too" || echo "differs: ${bf16_ids:-no output} (bf16 near-ties, see the Bf16DeviceReferenceTest lines)")"
  else
    note "generate --device $device_flag: FAILED: f32 ids '${dev_ids:-none}' vs cpu '${cpu_ids:-none}' (generate.log)"
  fi
fi

stage "compute-sanitizer on the new kernels, then the op tests (only with time left)"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
: >"$out/sanitizer.log"
run_sanitizer() {  # tool, least seconds worth starting, gtest filter, what
  local tool=$1 least=$2 filter=$3 what=$4 left rc v errors
  left=$(( deadline - $(date +%s) ))
  if [ $cpu_check = 1 ] || [ -z "$sanitizer" ] || ! have vt_tests; then
    note "$tool ($what): not run (no GPU, no compute-sanitizer or no vt_tests)"
    return
  fi
  if [ $left -lt "$least" ]; then
    note "$tool ($what): not run ($left s left)"
    return
  fi
  echo "--- $tool: $filter" >>"$out/sanitizer.log"
  timeout $(( left - 5 )) "$sanitizer" --tool "$tool" --error-exitcode 99 --print-limit 20 "$bin/vt_tests" \
    --gtest_filter="$filter" >>"$out/sanitizer.log" 2>&1
  rc=$?
  errors=$(grep -cE '^========= +(Invalid|Program hit|Uninitialized|Error|Race|Barrier|Malloc|Cuda API)' "$out/sanitizer.log")
  case $rc in
    0) v=clean ;; 99) v="ERRORS (sanitizer.log)" ;; 124|137) v="timed out (partial run)" ;; *) v="test failures (rc $rc)" ;;
  esac
  tail -2 "$out/sanitizer.log"
  note "$tool ($what): $v; $errors error lines in sanitizer.log so far"
}
if [ $bench_only = 0 ]; then
  # Leaves out the test that makes a capture fail on purpose (its CUDA API errors are the point).
  run_sanitizer memcheck 30 'MatMulSkinnyVariantsTest.*:GdnRecurrentVariantsTest.*:DeviceGraphTest.*:-DeviceGraphTest.ARecordingThatWaits*' "the new decode kernels"
  run_sanitizer racecheck 30 'GdnRecurrentVariantsTest.*:ArgmaxTest.*' "the shared-memory GDN kernel, Argmax"
  run_sanitizer memcheck 45 'MatMulTest.*:RmsNormTest.*:AddRmsNormTest.*:GdnTest.*:PagedAttentionTest.*:ArgmaxTest.*' "op tests"
fi

stage "summary ($(( $(date +%s) - started )) s in all; logs in $out)"
cat "$summary"

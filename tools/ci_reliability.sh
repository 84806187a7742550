#!/usr/bin/env bash
# The reliability half of the test command (docs/reliability.md), run after the main
# build's tests. One CPU build in build-asan with AddressSanitizer + UndefinedBehavior-
# Sanitizer (-O1, leak detection on, suppressions in tools/sanitizers), then:
#   1. its whole test suite, the soak test included;
#   2. every libFuzzer target for a fixed time from its seeds in fuzz/seeds (the seeds
#      are only read; new inputs go to a scratch corpus).
# The build is clang-14's, so that the fuzzers link the same engine library as the
# tests; without clang (tools/install_deps.sh installs it) the default compiler builds
# the suite and no fuzzer runs.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds=20
fuzzers=(gguf safetensors hf_config chat_template request_body tokenizer)

options=(-DVT_CUDA=OFF -DVT_ROCM=OFF -DVT_BUILD_BENCH=OFF -DVT_SANITIZE=address,undefined)
if command -v clang++-14 >/dev/null; then
  options+=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DVT_BUILD_FUZZERS=ON)
else
  echo "ci_reliability: clang++-14 not found: the suite is built by the default compiler and no fuzzer runs"
  fuzzers=()
fi

phase_start=$SECONDS
phase_done() {
  echo "ci_reliability: $1 took $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

cmake -S . -B build-asan -G Ninja "${options[@]}"
cmake --build build-asan
phase_done "the sanitizer build"
ctest --test-dir build-asan --output-on-failure -j2
phase_done "the test suite under ASan + UBSan"

mkdir -p build-asan/fuzz-artifacts
for name in "${fuzzers[@]}"; do
  corpus=$(mktemp -d)
  echo "ci_reliability: ${name}_fuzzer for ${fuzz_seconds} s"
  build-asan/bin/${name}_fuzzer -max_total_time=${fuzz_seconds} -timeout=30 -print_final_stats=1 -print_funcs=0 \
    -artifact_prefix=build-asan/fuzz-artifacts/${name}- "$corpus" fuzz/seeds/${name}
  rm -rf "$corpus"
done
if [ ${#fuzzers[@]} -gt 0 ]; then phase_done "the fuzzers"; fi

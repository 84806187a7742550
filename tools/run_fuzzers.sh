#!/usr/bin/env bash
# Runs every libFuzzer target of the test build (README's test command builds them in
# build-asan) for a fixed time from its seeds in fuzz/seeds, two at a time (CI has two
# cores). The seeds are only read; new inputs go to a scratch corpus, a crashing input
# to build-asan/fuzz-artifacts/. Each fuzzer's log is printed when it ends; the script
# fails if any fuzzer found something. Usage: tools/run_fuzzers.sh [seconds per fuzzer]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
build=build-asan
fuzzers=(gguf safetensors hf_config chat_template request_body tokenizer)
for name in "${fuzzers[@]}"; do
  if [ ! -x "$build/bin/${name}_fuzzer" ]; then
    echo "run_fuzzers: $build/bin/${name}_fuzzer is missing: run README's test command first" >&2
    exit 1
  fi
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$build/fuzz-artifacts"
run_one() {
  local name=$1
  mkdir "$scratch/$name"
  "$build/bin/${name}_fuzzer" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 -print_funcs=0 \
    -artifact_prefix="$build/fuzz-artifacts/${name}-" "$scratch/$name" "fuzz/seeds/$name" >"$scratch/$name.log" 2>&1
}

started=$SECONDS
failed=()
for ((i = 0; i < ${#fuzzers[@]}; i += 2)); do
  pair=("${fuzzers[@]:i:2}")
  pids=()
  for name in "${pair[@]}"; do
    run_one "$name" &
    pids+=($!)
  done
  for j in "${!pair[@]}"; do
    name=${pair[j]}
    status=0
    wait "${pids[j]}" || status=$?
    echo "run_fuzzers: ${name}_fuzzer, ${seconds} s: $([ $status -eq 0 ] && echo passed || echo "FAILED ($status)")"
    if [ $status -ne 0 ]; then
      cat "$scratch/$name.log"
      failed+=("$name")
    else
      grep -E '^(Done|stat::)' "$scratch/$name.log" || true
    fi
  done
done
echo "run_fuzzers: ${#fuzzers[@]} fuzzers took $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: findings in: ${failed[*]} (inputs in $build/fuzz-artifacts)" >&2
  exit 1
fi

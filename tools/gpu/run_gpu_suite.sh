#!/usr/bin/env bash
# The GPU suite in one call on the lent H200 (device tool `run`):
#   versions -> configure + build with CUDA (Release, ninja, all cores) -> the
#   coverage test and every vt test (op contract tests run on cuda:0 through
#   ForEachDeviceAndIsa) -> compute-sanitizer memcheck and racecheck on the op
#   tests -> GPU benchmarks -> a short summary, printed last.
#
# Usage (from the repository root):  tools/gpu/run_gpu_suite.sh [MEMCHECK_FILTER [RACECHECK_FILTER]]
#   gtest filters for the two sanitizer stages (defaults below: memcheck over every
#   test, racecheck over the op tests whose kernels share memory;
#   the out-of-memory test is left out: its failed cudaMalloc is the point of it,
#   and the sanitizer would report it as an API error).
# Logs go to $OUT (the device tool's output folder; /tmp/vt_gpu_out elsewhere):
#   build.log tests.log memcheck.log racecheck.log bench.log summary.txt
# GoogleTest is built from source first: from /usr/src/googletest if the machine
# has it, else from .gpu_carry/googletest (copy /usr/src/googletest there and name
# .gpu_carry in the call's `carry`); the GPU machine has no package registry.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/vt_gpu_out}
mkdir -p "$out"
build=/tmp/vt_gpu_build
jobs=$(nproc)
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
stage() { echo; echo "=== $* ($(date +%T))"; }
started=$(date +%s)
deadline=$(( started + 570 ))  # the device tool allows 600 s a call
# Seconds a stage may take: its own cap, but never past the deadline (minus what
# the later stages need at least).
budget() {
  local cap=$1 reserve=$2 left
  left=$(( deadline - $(date +%s) - reserve ))
  [ "$left" -lt "$cap" ] && cap=$left
  [ "$cap" -lt 10 ] && cap=10
  echo "$cap"
}

memcheck_filter=${1:-'*:-GpuDeviceTest.OutOfMemory*'}
racecheck_filter=${2:-'RmsNormTest.*:AddRmsNormTest.*:L2NormTest.*:PagedAttentionTest.NonContiguous*:PagedAttentionTest.OddHeadDims*:GdnTest.RealHead*:GdnTest.Decode*:MatMulTest.FloatWeightsOddK:MatMulTest.KQuant*:MoeRouterTest.*:LogSoftmaxTest.*:ArgmaxTest.*:GpuKernelRoutesTest.*'}

stage "versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc_bin" --version | tail -2
cmake --version | head -1
g++ --version | head -1
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "compute-sanitizer: ${sanitizer:-not found}"

stage "googletest"
gtest_src=/usr/src/googletest
[ -f "$gtest_src/CMakeLists.txt" ] || gtest_src="$repo/.gpu_carry/googletest"
if ! { cmake -S "$gtest_src" -B /tmp/gtest_build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
         -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/tmp/gtest.log 2>&1 &&
       ninja -C /tmp/gtest_build -j"$jobs" install >>/tmp/gtest.log 2>&1; }; then
  tail -20 /tmp/gtest.log
  note "FAILED: googletest from $gtest_src"
  exit 1
fi
echo "googletest from $gtest_src"

stage "configure and build (CUDA, Release, -j$jobs)"
# The CUDA toolkit may keep cuBLAS outside nvcc's folder (pip wheels): point CMake
# at whatever libcublas/cublas_v2.h this machine has.
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc_bin")")")
extra=()
if ! ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/targets/*/lib/libcublas.so* >/dev/null 2>&1; then
  cublas=$(find / -xdev -name 'libcublas.so*' 2>/dev/null | head -1)
  cublas_lt=$(find / -xdev -name 'libcublasLt.so*' 2>/dev/null | head -1)
  header=$(find / -xdev -name cublas_v2.h 2>/dev/null | head -1)
  echo "cuBLAS outside the toolkit: $cublas $cublas_lt $header"
  extra+=(-DCUDA_cublas_LIBRARY="$cublas" -DCUDA_cublasLt_LIBRARY="$cublas_lt" -DCMAKE_CUDA_FLAGS="-I$(dirname "$header")")
fi
# Warnings are errors in CI (gcc 12); this machine's compiler may warn differently.
if ! cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_CUDA=ON -DVT_ROCM=OFF \
       -DVT_BUILD_ENGINE=OFF -DVT_BUILD_BENCH=OFF -DVT_WERROR=OFF -DCMAKE_PREFIX_PATH=/tmp/gtest \
       -DCMAKE_CUDA_COMPILER="$nvcc_bin" "${extra[@]}" >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  note "FAILED: configure (see build.log)"
  exit 1
fi
if ! timeout "$(budget 420 120)" ninja -C "$build" -j"$jobs" vt vt_cuda vt_tests vt_gpu_bench >>"$out/build.log" 2>&1; then
  grep -E "error|FAILED" "$out/build.log" | head -40
  note "FAILED: build (see build.log)"
  exit 1
fi
note "build: ok in $(( $(date +%s) - started )) s"
cuobjdump --list-elf "$build/lib/libvt_cuda.so" 2>/dev/null | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c
cuobjdump --list-ptx "$build/lib/libvt_cuda.so" 2>/dev/null | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/ptx \1/' | sort | uniq -c

stage "tests (coverage + every vt test; op contract tests run on cuda:0)"
# One process per test suite: a kernel fault ends its CUDA context, and would
# otherwise fail every later suite too.
tests_started=$(date +%s)
tests_deadline=$(( tests_started + $(budget 240 100) ))
: >"$out/tests.log"
failed_suites=()
passed=0 failed=0 skipped=0
for suite in $("$build/bin/vt_tests" --gtest_list_tests | grep -E '^[A-Za-z]' | sed 's/\.$//'); do
  left=$(( tests_deadline - $(date +%s) ))
  if [ "$left" -le 5 ]; then
    failed_suites+=("$suite(not run: out of time)")
    continue
  fi
  timeout "$left" "$build/bin/vt_tests" --gtest_filter="$suite.*" >/tmp/suite.log 2>&1
  rc=$?
  cat /tmp/suite.log >>"$out/tests.log"
  passed=$(( passed + $(grep -cE '^\[       OK \]' /tmp/suite.log) ))
  skipped=$(( skipped + $(grep -cE '^\[  SKIPPED \] [A-Za-z].*\(' /tmp/suite.log) ))
  failed=$(( failed + $(grep -cE '^\[  FAILED  \] [A-Za-z].*\(' /tmp/suite.log) ))
  [ $rc != 0 ] && failed_suites+=("$suite(rc=$rc)")
done
grep -E "Failure|error:|^\[  FAILED  \] [A-Za-z].*\(" "$out/tests.log" | head -40
"$build/bin/vt_tests" --gtest_filter='CoverageTest.*' | sed -n '/^op /,/^Argmax/p'
note "tests: $passed passed, $failed failed, $skipped skipped, $(( $(date +%s) - tests_started )) s"
note "suites with failures: ${failed_suites[*]:-none}"

run_sanitizer() {  # tool, seconds, gtest filter
  local tool=$1 limit=$2 filter=$3 log="$out/$1.log" t0
  t0=$(date +%s)
  stage "compute-sanitizer --tool $tool (limit ${limit}s)"
  if [ -z "$sanitizer" ]; then
    note "$tool: compute-sanitizer not found"
    return
  fi
  timeout "$limit" "$sanitizer" --tool "$tool" --error-exitcode 99 --print-limit 20 \
    "$build/bin/vt_tests" --gtest_filter="$filter" >"$log" 2>&1
  local rc=$? verdict="test failures, see $tool.log"
  [ $rc = 0 ] && verdict=clean
  [ $rc = 99 ] && verdict="sanitizer errors, see $tool.log"
  [ $rc = 124 ] && verdict="timed out (partial run)"
  tail -4 "$log"
  note "$tool: $verdict; $(grep -cE '^\[       OK \]' "$log") tests ok, \
$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | wc -l) failed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1); $(( $(date +%s) - t0 )) s"
}
run_sanitizer memcheck "$(budget 150 70)" "$memcheck_filter"
run_sanitizer racecheck "$(budget 120 30)" "$racecheck_filter"

stage "benchmarks"
timeout "$(budget 60 0)" "$build/bin/vt_gpu_bench" 2>&1 | tee "$out/bench.log"

stage "summary ($(( $(date +%s) - started )) s in all)"
cat "$summary"

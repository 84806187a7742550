#!/usr/bin/env bash
# The vt tests (every op contract test, the runtime, the CPU backend) and the reference
# models against HF (vllm_model_tests: Qwen3.5 dense and MoE, Qwen3, through the
# engine's real path) built for 64-bit ARM Linux with Debian's cross compiler and run
# under qemu-user-static: the portable and NEON kernels on a CPU that is not x86-64
# (src/vt/CMakeLists.txt builds no x86 kernel there). Correctness only: qemu says
# nothing about speed on ARM.
#
#   tools/aarch64_tests.sh [BUILD_DIR]      (default build-aarch64)
#
# Needs g++-aarch64-linux-gnu, qemu-user-static, the engine's libraries for arm64
# (libpcre2-dev:arm64, libutf8proc-dev:arm64: tools/install_deps.sh) and googletest's
# sources (/usr/src/googletest, libgtest-dev), built here for the target. The engine is
# built without the server (cpp-httplib) and without Gloo.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build-aarch64}
toolchain=$repo/cmake/aarch64-linux-gnu.cmake
gtest=$build/googletest
if [ ! -f "$gtest/lib/cmake/GTest/GTestConfig.cmake" ]; then
  cmake -S /usr/src/googletest -B "$build/googletest-build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$gtest" >/dev/null
  cmake --build "$build/googletest-build" --target install >/dev/null
fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DVT_TARGET_PREFIX="$gtest" \
  -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_ENGINE=ON -DVT_BUILD_SERVER=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Gloo=ON \
  -DVT_BUILD_BENCH=OFF -DVT_CUDA=OFF -DVT_ROCM=OFF >/dev/null
cmake --build "$build" --target vt_tests vllm_model_tests
# The C and C++ runtimes of the cross toolchain (/usr/aarch64-linux-gnu/lib, the
# loader's own) come first: Debian's libc6:arm64, which the arm64 -dev packages pull
# into /lib/aarch64-linux-gnu, may be a newer build, and a loader of one build with
# the libc of another hangs in pthread_create. pcre2 and utf8proc are found there.
run=(qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
"${run[@]}" "$build/bin/vt_tests" --gtest_brief=1
# The reference models against HF (Qwen3.5 dense, tied, without RoPE, MoE, the
# text-only ForCausalLM layout; Qwen3; whole, chunked and mixed prompts, bf16
# activations; prefix-cache hits): ~1.5 min under emulation on a Zen 3 core. Left to
# x86 CI: the real-shaped Qwen3.5 (2.3 min here) and the demo model.
"${run[@]}" "$build/bin/vllm_model_tests" --gtest_brief=1 --gtest_filter='*:-*qwen35_tied_realshapes:*demo'


#!/usr/bin/env bash
# Installs the Debian 12 packages the build needs, skipping those already present.
# Everything comes from Debian; nothing is downloaded at build time.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev
  hipcc libamdhip64-dev rocm-device-libs   # the ROCm backend is compiled (not run) here
  clang-14 libclang-rt-14-dev                # libFuzzer targets
  libgloo-dev                                # CPU collectives of tensor parallelism
  gnuplot-nox                                # `vllm-cpp bench --plot` (run as a separate process)
  g++-aarch64-linux-gnu qemu-user-static     # the vt tests built for aarch64, run under qemu
  libpcre2-dev:arm64 libutf8proc-dev:arm64   # ...and the reference models (the engine's libraries, arm64)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  # The arm64 packages above come from Debian's multiarch archive.
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
# The `openai` npm client that drives the server in the openai_client test (which is
# skipped without node, npm or the package).
if command -v node >/dev/null && command -v npm >/dev/null; then
  npm ci --prefix "$(dirname "$0")/../tests/openai_client" --no-audit --no-fund --loglevel=error ||
    echo "npm ci failed: the openai_client test will be skipped"
fi

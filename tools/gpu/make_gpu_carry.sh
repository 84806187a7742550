#!/usr/bin/env bash
# Makes .gpu_carry (ignored by git) on this machine, for the device tool's `carry`:
# the GPU machine has no package registry, so a call brings
#   .gpu_carry/prefix/usr      Debian 12 packages unpacked by dpkg -x (nlohmann-json3-dev,
#                              libpcre2, libutf8proc, pkgconf, and cpp-httplib with OpenSSL,
#                              brotli and zlib for the server; gpu_build_env.sh uses them)
#   .gpu_carry/googletest      googletest's sources (/usr/src/googletest)
#   .gpu_carry/llama_src.tar.xz  the llama.cpp peer: node-llama-cpp 3.22.1's
#                              llama/gitRelease.bundle cloned, its llama/patches/*.diff
#                              applied, packed without .git, the GPU backends other than
#                              CUDA, docs, models and tests (bench/peer/gpu_compare.sh)
#   .gpu_carry/qwen3_tokenizer.tar.xz  Qwen3's tokenizer.json and tokenizer_config.json from
#                              the shared data folder, for gpu_compare.sh --structured
# Needs apt-get download, npm (the registry) and git. Usage: tools/gpu/make_gpu_carry.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry=$repo/.gpu_carry
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$carry/prefix"
(cd "$work" && apt-get download nlohmann-json3-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev \
  libutf8proc2 pkgconf libpkgconf3 pkgconf-bin \
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 libbrotli-dev libbrotli1 zlib1g-dev zlib1g)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$carry/prefix"; done
# Static archives and docs are not used (the server links the shared libraries);
# zlib1g-dev's libz.so points at /lib absolutely: point it at the carried copy.
find "$carry/prefix" \( -name '*.a' -o -path '*/share/doc*' -o -path '*/share/man*' \) -delete 2>/dev/null || true
ln -sf ../../../lib/x86_64-linux-gnu/libz.so.1 "$carry/prefix/usr/lib/x86_64-linux-gnu/libz.so"

rm -rf "$carry/googletest"
cp -r /usr/src/googletest "$carry/googletest"

(cd "$work" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null && tar xzf node-llama-cpp-3.22.1.tgz)
git clone -q "$work/package/llama/gitRelease.bundle" "$work/llama"
for patch in "$work"/package/llama/patches/*.diff; do git -C "$work/llama" apply "$patch"; done
rm -rf "$work/llama/.git" "$work/llama/docs" "$work/llama/models" "$work/llama/tests" \
  "$work/llama/media" "$work/llama/gguf-py" "$work/llama/examples/model-conversion"
for backend in cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn zendnn; do
  rm -rf "$work/llama/ggml/src/ggml-$backend"
done
tar cJf "$carry/llama_src.tar.xz" -C "$work/llama" .
tokenizer_dir=$repo/../shared/data/tokenizers/qwen3
if [ -f "$tokenizer_dir/tokenizer.json" ]; then
  tar cJf "$carry/qwen3_tokenizer.tar.xz" -C "$tokenizer_dir" tokenizer.json tokenizer_config.json
else
  echo "make_gpu_carry: no Qwen3 tokenizer at $tokenizer_dir: gpu_compare.sh --structured will have none" >&2
fi
du -sh "$carry/llama_src.tar.xz" "$carry"

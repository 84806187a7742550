# Sourced by the GPU-machine scripts (run_gpu_final.sh, bench/peer/gpu_compare.sh):
# the engine's packages from .gpu_carry, googletest, and a CUDA build of the engine.
#
# The GPU machine has no package registry and none of the engine's packages: a call
# carries .gpu_carry (ignored by git), holding googletest's sources
# (.gpu_carry/googletest) and, unpacked from Debian 12 packages (dpkg -x),
# nlohmann-json3-dev, libpcre2-dev + libpcre2-8-0, libutf8proc-dev + libutf8proc2
# and pkgconf (.gpu_carry/prefix/usr; the libraries need only libc), and the llama.cpp
# peer's sources; tools/gpu/make_gpu_carry.sh makes it (~20 s, 7 MB).
# The device tool takes at most 64 MiB with the tracked files (43 MB in December
# 2026) and .gpu_carry is 23 MB: a call without the llama.cpp peer (--no-peer)
# carries its parts instead, [".gpu_carry/googletest", ".gpu_carry/prefix",
# ".gpu_carry/qwen3_tokenizer.tar.xz"], and one with the peer leaves out what it
# does not use (the tokenizer without --structured).
# cpp-httplib and the libraries it links (OpenSSL 3, brotli, zlib) are carried too, so
# VT_BUILD_SERVER=AUTO builds the OpenAI server; gpu_compare.sh rebuilds without it
# if the binary cannot start on that machine.
#
# Needs: $repo (the checkout), $out (where logs go). Defines gpu_env_setup,
# gpu_build_googletest PREFIX, gpu_configure BUILD [extra cmake args] and
# gpu_nvcc (the compiler's path).

gpu_carry="$repo/.gpu_carry"
gpu_prefix="$gpu_carry/prefix"
gpu_libdir="$gpu_prefix/usr/lib/x86_64-linux-gnu"
gpu_nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

# pkg-config sees only the carried .pc files; their /usr paths are rebased onto the
# carried prefix by PKG_CONFIG_SYSROOT_DIR.
gpu_env_setup() {
  export PKG_CONFIG_LIBDIR="$gpu_libdir/pkgconfig:$gpu_prefix/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$gpu_prefix"
  export LD_LIBRARY_PATH="$gpu_libdir:$gpu_prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  chmod +x "$gpu_prefix/usr/bin/pkgconf" 2>/dev/null
  gpu_pkg_config=$(command -v pkg-config || command -v pkgconf || echo "$gpu_prefix/usr/bin/pkgconf")
  local module
  for module in libpcre2-8 libutf8proc; do
    echo "$module: $("$gpu_pkg_config" --modversion $module 2>&1)"
  done
}

# googletest from the machine (/usr/src/googletest) or the carry, installed in PREFIX.
gpu_build_googletest() {
  local prefix=$1 src=/usr/src/googletest
  [ -f "$src/CMakeLists.txt" ] || src="$gpu_carry/googletest"
  [ -f "$prefix/lib/cmake/GTest/GTestConfig.cmake" ] && return 0
  cmake -S "$src" -B "$prefix-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
    -DCMAKE_INSTALL_PREFIX="$prefix" >>"$out/build.log" 2>&1 &&
    ninja -C "$prefix-build" -j"$(nproc)" install >>"$out/build.log" 2>&1
}

# Configures BUILD with CUDA, the engine without the server, Release; extra
# arguments go to cmake. The toolkit may keep cuBLAS outside nvcc's folder: CMake is
# pointed at this machine's. Warnings are errors in CI (gcc 12), not here (another
# gcc may warn differently).
gpu_configure() {
  local build=$1
  shift
  local cuda_flags=(-DVT_CUDA=ON -DCMAKE_CUDA_COMPILER="$gpu_nvcc")
  local cuda_root
  cuda_root=$(dirname "$(dirname "$(readlink -f "$gpu_nvcc")")")
  if ! ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/targets/*/lib/libcublas.so* >/dev/null 2>&1; then
    local cublas cublas_lt header
    cublas=$(find / -xdev -name 'libcublas.so*' 2>/dev/null | head -1)
    cublas_lt=$(find / -xdev -name 'libcublasLt.so*' 2>/dev/null | head -1)
    header=$(find / -xdev -name cublas_v2.h 2>/dev/null | head -1)
    echo "cuBLAS outside the toolkit: $cublas $cublas_lt $header"
    cuda_flags+=(-DCUDA_cublas_LIBRARY="$cublas" -DCUDA_cublasLt_LIBRARY="$cublas_lt"
                 -DCMAKE_CUDA_FLAGS="-I$(dirname "$header")")
  fi
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" -DVT_ROCM=OFF \
    -DVT_BUILD_ENGINE=ON -DVT_BUILD_SERVER=AUTO -DVT_WERROR=OFF \
    -DCMAKE_PREFIX_PATH="$build-gtest;$gpu_prefix/usr" -DPKG_CONFIG_EXECUTABLE="$gpu_pkg_config" "$@" \
    >>"$out/build.log" 2>&1
}

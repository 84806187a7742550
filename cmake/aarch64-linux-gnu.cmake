# Cross-compiling for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu; the tests
# run under qemu-user-static (tools/aarch64_tests.sh). Libraries and packages are
# looked up only under the target's root (/usr/aarch64-linux-gnu), under
# VT_TARGET_PREFIX when given (googletest built for the target), and in Debian's
# multiarch folders of arm64 packages (/usr/lib/aarch64-linux-gnu: the engine's
# libpcre2-dev:arm64 and libutf8proc-dev:arm64, found through their pkg-config files).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu ${VT_TARGET_PREFIX} /)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L /usr/aarch64-linux-gnu)

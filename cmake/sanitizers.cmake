# -DVT_SANITIZE=address,undefined or -DVT_SANITIZE=thread: every C and C++ target of the
# tree is compiled and linked with those sanitizers. The GPU backends' device code is
# compiled by nvcc and hipcc as in any build, uninstrumented: they are shared libraries
# that the instrumented program loads, and the sanitizers check what they allocate
# through malloc (the runtime's interceptors) but not their own loads and stores. The
# test binaries get their runtime options and the suppression files
# of tools/sanitizers (third-party reports only, each with its reason) from
# tools/sanitizers/default_options.cpp.
set(vt_sanitizers_known address undefined thread leak)
string(REPLACE "," ";" vt_sanitizers "${VT_SANITIZE}")
foreach(sanitizer IN LISTS vt_sanitizers)
  if(NOT sanitizer IN_LIST vt_sanitizers_known)
    message(FATAL_ERROR "VT_SANITIZE=${VT_SANITIZE}: unknown sanitizer '${sanitizer}' (use address,undefined or thread)")
  endif()
endforeach()
if("thread" IN_LIST vt_sanitizers AND ("address" IN_LIST vt_sanitizers OR "leak" IN_LIST vt_sanitizers))
  message(FATAL_ERROR "VT_SANITIZE=${VT_SANITIZE}: thread cannot be combined with address or leak (separate builds)")
endif()
set(vt_sanitize_flags -fsanitize=${VT_SANITIZE} -fno-omit-frame-pointer)
# Release (the default) becomes -O1 with line tables: the level the sanitizers are made
# for, compiled in a half to a fifth of the time of -O3 -g, and reports still give file
# and line. Other build types keep their own levels.
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  list(APPEND vt_sanitize_flags -O1 -g1)
else()
  list(APPEND vt_sanitize_flags -g)
endif()
if("undefined" IN_LIST vt_sanitizers)
  list(APPEND vt_sanitize_flags -fno-sanitize-recover=undefined)  # undefined behaviour fails the test
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${vt_sanitize_flags}>")
# Only links by the C/C++ compiler: the CUDA backend is linked by nvcc's host compiler
# (g++), whose -fsanitize would put GCC's sanitizer runtime into it next to clang's.
add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${VT_SANITIZE}>")

# The runtimes' options and suppression files, linked into every test binary
# (tests/CMakeLists.txt).
add_library(vt_sanitizer_options OBJECT ${PROJECT_SOURCE_DIR}/tools/sanitizers/default_options.cpp)
target_compile_definitions(vt_sanitizer_options PRIVATE
                           VT_SANITIZER_SUPPRESSIONS="${PROJECT_SOURCE_DIR}/tools/sanitizers")

message(STATUS "vt: sanitizers: ${VT_SANITIZE}")

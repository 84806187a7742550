# Decides which GPU backends to build. Each is a shared library loaded at run time
# by vt::LoadBackends(), so the same binaries run on machines without a GPU.
set(VT_BUILT_BACKENDS cpu)

if(NOT VT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/vt/cuda ${CMAKE_BINARY_DIR}/vt_cuda)
    list(APPEND VT_BUILT_BACKENDS cuda)
  elseif(VT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VT_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "vt: nvcc not found, the CUDA backend is not built")
  endif()
endif()

if(NOT VT_ROCM STREQUAL "OFF")
  find_program(VT_HIP_CLANG clang++-15)
  find_path(VT_HIP_INCLUDE hip/hip_runtime.h PATHS /usr/include)
  find_library(VT_HIP_RUNTIME amdhip64)
  if(VT_HIP_CLANG AND VT_HIP_INCLUDE AND VT_HIP_RUNTIME AND EXISTS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/vt/rocm ${CMAKE_BINARY_DIR}/vt_rocm)
    list(APPEND VT_BUILT_BACKENDS rocm)
  elseif(VT_ROCM STREQUAL "ON")
    message(FATAL_ERROR "VT_ROCM=ON but clang++-15, HIP headers, libamdhip64 or the AMD device libraries are missing "
                        "(apt-get install hipcc libamdhip64-dev rocm-device-libs)")
  else()
    message(STATUS "vt: HIP toolchain not found, the ROCm backend is not built")
  endif()
endif()

message(STATUS "vt: backends built: ${VT_BUILT_BACKENDS}")
foreach(backend IN LISTS VT_BUILT_BACKENDS)
  string(TOUPPER ${backend} upper)
  target_compile_definitions(vt PRIVATE VT_BUILT_${upper})
endforeach()

# The GPU benchmark uses only the public vt API and no benchmark library, so it is
# built wherever a GPU backend is (tools/gpu/run_gpu_suite.sh runs it on the H200).
if(VT_BUILT_BACKENDS MATCHES "cuda|rocm")
  add_executable(vt_gpu_bench ${PROJECT_SOURCE_DIR}/bench/gpu_benchmarks.cpp)
  target_link_libraries(vt_gpu_bench PRIVATE vt vt_warnings)
endif()

# The batch-1 decode benchmark of a random-weight Qwen3.5 with 9B shapes, through the
# engine (bench/gpu_decode_bench.cpp). It runs on any device, so it is built with the
# engine: `--device cpu --shape small` checks it on machines without a GPU. (`vllm`
# is defined later, by src/vllm; CMake resolves the name when it generates.)
if(VT_BUILD_ENGINE)
  add_executable(gpu_decode_bench ${PROJECT_SOURCE_DIR}/bench/gpu_decode_bench.cpp)
  target_include_directories(gpu_decode_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(gpu_decode_bench PRIVATE vllm vt_warnings)
endif()

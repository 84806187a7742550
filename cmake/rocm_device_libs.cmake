# The AMD device-library folder the HIP compiler links into every kernel.
#
# Debian's rocm-device-libs (ROCm 5.2) predates RDNA3 and lacks the gfx11 ISA
# version files, so clang-15 cannot build gfx1100 from /usr/lib/.../amdgcn/bitcode
# alone. This makes ${VT_ROCM_DEVICE_LIB_DIR} in the build tree: a link to every
# Debian .bc, plus oclc_isa_version_110N.bc generated from the gfx1030 one by
# rewriting its version constant (the file holds nothing but that constant).
# Nothing is downloaded.
set(VT_ROCM_BITCODE_DIR /usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
set(VT_ROCM_DEVICE_LIB_DIR ${CMAKE_BINARY_DIR}/rocm_device_libs)

find_program(VT_LLVM_DIS llvm-dis-15 REQUIRED)
find_program(VT_LLVM_AS llvm-as-15 REQUIRED)

file(MAKE_DIRECTORY ${VT_ROCM_DEVICE_LIB_DIR})
file(GLOB vt_rocm_bitcode_files ${VT_ROCM_BITCODE_DIR}/*.bc)
foreach(bitcode IN LISTS vt_rocm_bitcode_files)
  get_filename_component(name ${bitcode} NAME)
  file(CREATE_LINK ${bitcode} ${VT_ROCM_DEVICE_LIB_DIR}/${name} SYMBOLIC)
endforeach()

foreach(version 1100 1101 1102 1103)
  set(generated ${VT_ROCM_DEVICE_LIB_DIR}/oclc_isa_version_${version}.bc)
  if(NOT EXISTS ${generated})
    execute_process(
      COMMAND ${VT_LLVM_DIS} ${VT_ROCM_BITCODE_DIR}/oclc_isa_version_1030.bc -o -
      OUTPUT_VARIABLE vt_isa_ir
      RESULT_VARIABLE vt_dis_result)
    if(NOT vt_dis_result EQUAL 0)
      message(FATAL_ERROR "vt: llvm-dis-15 failed on oclc_isa_version_1030.bc")
    endif()
    string(REPLACE "i32 10300" "i32 ${version}0" vt_isa_ir "${vt_isa_ir}")
    file(WRITE ${generated}.ll "${vt_isa_ir}")
    execute_process(COMMAND ${VT_LLVM_AS} ${generated}.ll -o ${generated} RESULT_VARIABLE vt_as_result)
    if(NOT vt_as_result EQUAL 0)
      message(FATAL_ERROR "vt: llvm-as-15 failed to make ${generated}")
    endif()
  endif()
endforeach()

// MatMul kernels written for both GPU backends (matmul.cu). Each backend registers
// its own MatMul entry (src/vt/cuda/cuda_matmul.cu, src/vt/rocm/rocm_matmul.cu),
// which asks ChooseMatMul and runs these or the vendor library.
#pragma once

#include "matmul_choice.h"
#include "vt/op_args.h"

namespace vt::gpu {

// The choice inputs of a validated MatMul call.
MatMulShape DescribeMatMul(const MatMulArgs& args, bool vendor_blas_available);

// Runs any of our kernels (throws for kVendorBlas).
void RunOwnMatMul(const MatMulArgs& args, MatMulKernel kernel);

}  // namespace vt::gpu

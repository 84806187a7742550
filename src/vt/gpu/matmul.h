// MatMul kernels written for both GPU backends (matmul.cu). Each backend registers
// its own MatMul entry (src/vt/cuda/cuda_matmul.cu, src/vt/rocm/rocm_matmul.cu),
// which asks ChooseMatMul and runs these or the vendor library.
#pragma once

#include "matmul_choice.h"
#include "vt/op_args.h"

namespace vt::gpu {

// The choice inputs of a validated MatMul call.
MatMulShape DescribeMatMul(const MatMulArgs& args, bool vendor_blas_available);

// Throws the error naming `op` for q8_k weights (an activation block format that no
// kernel multiplies as weights, on any backend).
void RejectActivationBlockWeights(const char* op, const Tensor& w);

// Runs any of our kernels (throws for kVendorBlas).
void RunOwnMatMul(const MatMulArgs& args, MatMulKernel kernel);

}  // namespace vt::gpu

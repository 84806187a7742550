// The grouped tensor-core MoeExperts kernels (moe_grouped.cu), for the launcher in
// moe.cu.
#pragma once

#include "gpu_runtime.h"
#include "vt/op_args.h"

namespace vt::gpu {

// Whether the grouped kernels take these operands: CUDA (false on HIP), gate, up and
// down of one dtype among Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, bf16, f16 (float weights
// only with 16-bit x), H and I multiples of 32, unit inner strides, gate and up
// rows equally strided.
bool MoeGroupedSupported(const MoeExpertsArgs& a);

// Whether they run on the int8 tensor cores: supported, and gate, up and down in a
// format quant_mma.cuh decodes (Q8_0, Q4_0, Q4_K, Q5_K) with rows aligned as it reads.
bool MoeGroupedInt8(const MoeExpertsArgs& a);

// Runs them on `stream` (the caller checked MoeGroupedSupported).
void RunMoeGrouped(const MoeExpertsArgs& a, gpuStream_t stream);

}  // namespace vt::gpu

// MatMul kernels written for both GPU backends (matmul.cu). Each backend registers
// its own MatMul entry (src/vt/cuda/cuda_matmul.cu, src/vt/rocm/rocm_matmul.cu),
// which asks ChooseMatMul and runs these or the vendor library.
#pragma once

#include <cstdint>

#include "matmul_choice.h"
#include "vt/dtype.h"
#include "vt/op_args.h"

namespace vt::gpu {

// The choice inputs of a validated MatMul call.
MatMulShape DescribeMatMul(const MatMulArgs& args, bool vendor_blas_available);

// Runs any of our kernels (throws for the vendor routes). They write x's dtype, so
// a call with f32 out from 16-bit x goes through WithWidenedX first.
void RunOwnMatMul(const MatMulArgs& args, MatMulKernel kernel);

// The same product with x widened to f32 (exact; a decode-sized copy), for the
// backends' MatMul entries to run again when out is f32 and x is not.
MatMulArgs WithWidenedX(const MatMulArgs& args);

// matmul_quant.cu: whether the int8 dot lanes (gpu_quant_dot.cuh) read the rows of
// block weights w (a format with a lane type, K a multiple of 32, rows aligned as
// the lanes load them); whether kQuantGemv takes a MatMul; the kernel itself.
bool QuantLanesRead(const Tensor& w);
bool QuantGemvAccepts(const MatMulArgs& args);
void RunQuantGemv(const MatMulArgs& args);
// Whether w's rows split into 16-byte aligned stages of 256 values: K a multiple of
// 256 and every row on 16 bytes (each block format's 256 values fill whole 16-byte
// units: Q8_0 272 bytes, Q4_0 / Q4_K 144, Q5_K 176). The cp.async kernels copy such
// stages (the staged GEMV, the pipelined int8 tiles).
inline bool WeightRowsSplitIn16ByteStages(const MatMulArgs& a) {
  return a.x.size(1) % 256 == 0 && reinterpret_cast<uintptr_t>(a.w.data()) % 16 == 0 &&
         BytesFor(a.w.dtype(), a.w.stride(0)) % 16 == 0;
}
// matmul_quant_staged.cu: whether kQuantGemvStaged takes a MatMul (false on HIP); the kernel.
bool QuantGemvStagedTakes(const MatMulArgs& args);
void RunQuantGemvStaged(const MatMulArgs& args);
// The same kernel over the chosen experts' rows of MoeExperts at one token (false on
// HIP; every weight one staged format, H and I multiples of 256, 16-byte aligned rows
// and experts): the gate|up pass writes gate_up [1, 2kI] f32 (pair j's gate outputs
// at 2jI, its up outputs at 2jI + I), the down pass reads activations [1, kI] f32
// (pair j's weighted SiLU(gate) * up at jI) and writes out. With the shared expert
// (StagedExpertsTakeShared: Is = I, the routed experts' dtype and row bytes) it is
// pair k: gate_up [1, 2(k + 1)I], activations [1, (k + 1)I].
bool StagedExpertsTake(const MoeExpertsArgs& args);
bool StagedExpertsTakeShared(const MoeExpertsArgs& args);
void RunStagedExpertGateUp(const MoeExpertsArgs& args, const Tensor& gate_up);
void RunStagedExpertDown(const MoeExpertsArgs& args, const Tensor& activations);
// matmul_quant_mma.cu: whether kQuantMma takes a MatMul (false on HIP); the kernel.
bool QuantMmaAccepts(const MatMulArgs& args);
// Whether kQuantMma runs its pipelined kernel for these args (M <= 16, K a multiple
// of 256, 16-byte aligned weight rows); asked only where QuantMmaAccepts.
bool QuantMmaPipelinedTakes(const MatMulArgs& args);
void RunQuantMma(const MatMulArgs& args);
// x [M, K] float (strided rows, K a multiple of 32) quantized to XBlocks
// (gpu_quant_dot.cuh), returned as an i32 tensor [M, K / 32, 10] holding them.
Tensor QuantizeActivations(const Tensor& x);
// Block-format rows [row0, row0 + out.size(0)) of w decoded into the dense float
// matrix `out` ([rows, K], any float dtype, strided rows), for the vendor route.
void DequantizeWeightRows(const Tensor& w, int64_t row0, const Tensor& out);

}  // namespace vt::gpu

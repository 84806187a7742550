// The tensor-core PagedAttention kernel for prompts (paged_attention_mma.cu), for
// the launcher in paged_attention.cu.
#pragma once

#include "gpu_runtime.h"
#include "vt/op_args.h"

namespace vt::gpu {

// Whether the kernel reads these operands: CUDA (false on HIP), head_dim 64, 128 or
// 256, q and both caches of one 16-bit dtype (bf16 or f16), cache rows that start
// on 16 bytes (base pointers and block/offset/head strides), unit inner strides of
// q, out and the caches.
bool PagedAttentionMmaSupports(const PagedAttentionArgs& a);

// Runs it on `stream` (the caller checked PagedAttentionMmaSupports).
void RunPagedAttentionMma(const PagedAttentionArgs& a, gpuStream_t stream);

}  // namespace vt::gpu

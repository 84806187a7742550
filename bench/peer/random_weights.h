// Seeded random weights for random_gguf, produced directly in their stored GGUF
// form (no f32 copy, no quantizer search), fast enough that writing a 37 GB model
// is bound by the disk, not by generating it.
//
// A tensor is `rows` rows of `n` values (n = the last dim, whole blocks of the
// dtype). Row r is drawn from its own generator, seeded by (tensor seed, r), so the
// bytes depend on the seed only, never on how many threads made them.
//
// What the values are (dequantized where the dtype is a block type):
//   matrices, embeddings, experts: mean 0, std ~0.02 (an init's magnitude):
//     f32 / f16 / bf16: approximately normal (a sum of 4 uniforms);
//     block types: uniform random quants with a per-block scale chosen so the block's
//     std is 0.02 x U(0.75, 1.25), and every block is one ggml decodes (see
//     random_weights.cpp for the per-type rules);
//   everything else is f32 and drawn as HF's init or convention (see FillSmallRow).
#pragma once

#include <cstdint>
#include <string>

#include "vllm/model_loader/weight_names.h"
#include "vt/dtype.h"

namespace vllm::bench {

// The seed of one tensor: the file's --seed mixed with the tensor's name.
uint64_t TensorSeed(uint64_t seed, const std::string& name);

// Writes the stored bytes of a [rows, n] tensor of `dtype` to `dst`
// (rows * vt::BytesFor(dtype, n) bytes) on up to `num_threads` threads. Matrix kinds
// (kMatrix, kEmbedding, kExperts) take any dtype GGUF holds; the other kinds must be
// kF32, as the converter stores them.
void FillRandomTensor(vllm::WeightKind kind, vt::DType dtype, int64_t rows, int64_t n, uint64_t tensor_seed,
                      int num_threads, uint8_t* dst);

}  // namespace vllm::bench

// Tensor parallelism (Megatron-style, as vLLM's): what one rank of a group of
// world_size holds of a model, and the config it runs. The layers are unchanged: a
// rank runs the same DecoderModel on its share of heads and widths, and the model
// sums the partial outputs of each block over the group (decoder_model.h).
//
//   column-parallel (output rows split; a view of the checkpoint, no copy):
//     attention q_proj (whole heads: query and gate rows), k_proj, v_proj (KV heads;
//     replicated when the group is larger than the KV heads), GDN in_proj_qkv / z /
//     b / a and conv1d, A, dt_bias (key and value heads), MLP gate_proj / up_proj,
//     experts' gate / up (intermediate rows of every expert), shared expert gate / up
//   row-parallel (input columns split; copied): o_proj, GDN out_proj, down_proj,
//     experts' down, shared expert down (their outputs are partial sums)
//   expert parallel (expert_parallel, vLLM's --enable-expert-parallel): rank r holds
//     the whole experts [r E/N, (r+1) E/N) (views) instead of every expert's width
//     share; the router still scores all E, a token's pairs on other ranks' experts
//     add nothing here (the expert slice of vt::MoeExpertsArgs), and the sum after the FFN adds
//     every rank's experts. The shared expert stays split by width.
//   replicated: norms, the router, the shared-expert gate; the embedding and the LM
//     head are split by vocabulary rows in DecoderModel (VocabShardOf): embeddings
//     summed over ranks, logits gathered.
//
// GDN value heads keep their layout: in HF's grouped order a rank's value heads are
// one run; in GGUF's tiled order (value head j reads key head j % Hk) they are Hv/Hk
// runs of Hk/world heads, so that the rank's local heads are again tiled.
// A quantized block type needs every column run to be whole blocks (e.g. 256 for
// Q4_K): ShardForTensorParallel names the weight and the block size otherwise.
#pragma once

#include <cstdint>

#include "vllm/config/model_config.h"
#include "vllm/model_loader/model_loader.h"

namespace vllm {

struct TensorParallelShard {
  ModelConfig config;   // heads and widths of one rank; vocab_size stays the model's
  WeightStore weights;  // the canonical names, with that config's shapes
};

// Throws vt::Error naming the config field that the group size does not divide.
// expert_parallel on a model without experts, or over one rank, is refused by name.
ModelConfig ShardModelConfig(const ModelConfig& config, int rank, int world_size, bool expert_parallel = false);
TensorParallelShard ShardForTensorParallel(const ModelConfig& config, const WeightStore& weights, int rank,
                                           int world_size, bool expert_parallel = false);

// The LM head rows of a rank: [begin, end) of the vocabulary, every rank padded to
// `padded` = ceil(vocab / world_size) rows so the gathered logits are equal blocks.
struct VocabShard {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t padded = 0;
};
VocabShard VocabShardOf(int64_t vocab_size, int rank, int world_size);

}  // namespace vllm

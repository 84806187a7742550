// The decoder-only language model shared by the Qwen3.5 (dense, MoE) and Qwen3
// families: embedding -> L decoder layers -> final norm -> LM head.
//
//   DecoderLayer i:  h = x + Mixer_i(RMSNorm(x))      Mixer: dense_attn::AttnBlock or gdn::GdnBlock
//                    x' = h + FFN_i(RMSNorm(h))        FFN:   GatedMlp or SparseMoe
//
// The residual add and the next norm are one fused vt::AddRmsNorm. What differs
// between families is data, not code: which layers are GDN, whether attention has
// an output gate, whether norms are zero-centred (1 + w), rotary width, MoE.
#pragma once

#include <optional>
#include <vector>

#include "vllm/config/model_config.h"
#include "vllm/model_executor/layers/dense_attn.h"
#include "vllm/model_executor/layers/gdn.h"
#include "vllm/model_executor/layers/mlp.h"
#include "vllm/model_executor/model.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"

namespace vllm {

// Every weight of `specs` (weight_names.h) must exist with its canonical shape, so a
// config/weights mismatch is named before any layer is built; `missing_hint` ends the
// message of a missing one.
void CheckWeightsMatchSpecs(const std::vector<WeightSpec>& specs, const ModelConfig& config, const WeightStore& weights,
                            const std::string& missing_hint = "");

class Communicator;

struct ModelOptions {
  vt::Device device = vt::kCpu;
  vt::DType activation_dtype = vt::DType::kF32;  // f32, bf16 or f16
  // Tensor parallelism: the group this rank runs the model with (not owned; it must
  // outlive the model). The model is then built from this rank's shard
  // (ModelRegistry::Create shards a whole checkpoint, distributed/tensor_parallel.h):
  // each block's output is summed over the group, and the LM head computes this
  // rank's vocabulary rows and gathers everyone's. Null or a group of one: no TP.
  Communicator* tensor_parallel = nullptr;
  // With tensor_parallel: each rank holds whole experts, E / N of them, instead of
  // every expert's width share (vLLM's --enable-expert-parallel; MoE models only).
  bool enable_expert_parallel = false;
};

class DecoderModel final : public Model {
 public:
  // Weights are taken from `weights` (copied to options.device once when it is not the CPU).
  // With options.tensor_parallel, `config` and `weights` are this rank's shard
  // (ShardForTensorParallel) and the embedding and the LM head keep this rank's
  // vocabulary rows (VocabShardOf).
  DecoderModel(const ModelConfig& config, const WeightStore& weights, const ModelOptions& options);

  int64_t vocab_size() const override { return config_.vocab_size; }
  vt::Device device() const override { return options_.device; }
  vt::DType activation_dtype() const override { return options_.activation_dtype; }
  std::vector<LayerCacheSpec> cache_spec() const override;
  vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches& caches) const override;
  // The final norm's output [T, H] (activation dtype) at every token row: what the LM
  // head reads, and what the MTP head drafts from. With gdn_projected, entry i of it
  // ([L]) becomes GDN layer i's in_proj output [T, W] (for ReplayGdnStates).
  vt::Tensor ForwardHidden(const ForwardBatch& batch, const ModelCaches& caches,
                           std::vector<vt::Tensor>* gdn_projected = nullptr) const;
  // Advances every GDN layer's states of meta's sequences over rows `rows` [T'] i32 of
  // an earlier ForwardHidden's gdn_projected, as that forward did over them (GdnBlock::
  // ReplayState): speculative decoding's rollback to the last accepted token.
  void ReplayGdnStates(const std::vector<vt::Tensor>& gdn_projected, const vt::Tensor& rows, const AttnMetadata& meta,
                       const ModelCaches& caches) const;
  // logits [N, V] f32 of the rows `logits_indices` of `hidden` [T, H].
  vt::Tensor LmHead(const vt::Tensor& hidden, const vt::Tensor& logits_indices) const;
  const ModelConfig& config() const { return config_; }
  const vt::Tensor& embed_tokens() const { return embed_tokens_; }

  // The full-attention block and the FFN of the decoder layer whose weights are named
  // `prefix` + "self_attn.*" / "mlp.*" (a main layer's "layers.N.", the MTP head's
  // "mtp.layers.0."), on this model's device.
  dense_attn::AttnBlock BuildAttention(const WeightStore& weights, const std::string& prefix) const;
  void BuildFeedForward(const WeightStore& weights, const std::string& prefix, std::optional<GatedMlp>& mlp,
                        std::optional<SparseMoe>& moe) const;
  vt::Tensor Weight(const WeightStore& weights, const std::string& name) const;  // on this model's device

 private:
  struct DecoderLayer {
    vt::Tensor input_layernorm, post_attention_layernorm;  // [H]
    std::optional<dense_attn::AttnBlock> attn;
    std::optional<gdn::GdnBlock> gdn;
    std::optional<GatedMlp> mlp;
    std::optional<SparseMoe> moe;
  };
  DecoderLayer BuildLayer(int64_t index, const WeightStore& weights) const;

  ModelConfig config_;
  ModelOptions options_;
  // The embedding rows of ids [T] into out [T, H] (contiguous): with tensor
  // parallelism each rank holds a vocabulary shard and the rows are summed over ranks.
  void Embed(const vt::Tensor& ids, const vt::Tensor& out) const;
  // Sums a block's partial output [T, H] over the tensor-parallel group (no-op without one).
  void ReduceOverRanks(const vt::Tensor& partial) const;

  float norm_offset_;  // 1 for zero-centred norms
  vt::Tensor embed_tokens_, final_norm_, lm_head_;
  std::vector<DecoderLayer> layers_;
};

}  // namespace vllm

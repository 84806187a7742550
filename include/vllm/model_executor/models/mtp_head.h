// Qwen3.5's multi-token-prediction head (docs/qwen35.md §8): from the trunk's final
// hidden state h_i (after its final norm) and the next token t_{i+1}, the logits of
// the token after that, t_{i+2}:
//
//   e  = RMSNorm(embed(t_{i+1}); pre_fc_norm_embedding)    hh = RMSNorm(h_i; pre_fc_norm_hidden)
//   x  = fc([e | hh])                                        [T, 2H] -> [T, H]
//   x  = full-attention decoder layer at position i, with its own paged KV cache
//        (the trunk's AttnBlock and FFN: GatedMlp or SparseMoe)
//   out = RMSNorm(x; mtp.norm)   logits = lm_head(out)       the trunk's embedding and LM head
//
// `out` is also what a second draft step feeds back as its hidden state (vLLM reuses
// the one layer for k > 1). The weights are LoadOptions::load_mtp's (weight_names.h
// MtpWeightSpecs). Speculative decoding (drafting, verification) is built on this.
#pragma once

#include <optional>

#include "vllm/model_executor/layers/dense_attn.h"
#include "vllm/model_executor/layers/mlp.h"
#include "vllm/model_executor/model.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_loader/model_loader.h"

namespace vllm {

class MtpHead {
 public:
  // `trunk` lends its embedding and LM head (and must outlive the head); the mtp.*
  // weights come from `weights`, copied to options.device once.
  MtpHead(const ModelConfig& config, const WeightStore& weights, const ModelOptions& options,
          const DecoderModel& trunk);

  // Its attention layer's cache: a full-attention layer of the trunk's shape.
  LayerCacheSpec cache_spec() const;

  // hidden [T, H] (the trunk's final-norm output, activation dtype) and next_ids [T] i32
  // at the T rows of `meta` (positions: the hidden rows' own positions); writes the
  // rows' K/V into `kv`. Returns logits [N, V] f32 at the rows `logits_indices` [N]; when
  // out_hidden is given, the head's final-norm output [T, H] goes there too.
  vt::Tensor Forward(const vt::Tensor& hidden, const vt::Tensor& next_ids, const AttnMetadata& meta,
                     const LayerKvCache& kv, const vt::Tensor& logits_indices,
                     vt::Tensor* out_hidden = nullptr) const;

 private:
  vt::Tensor Weight(const WeightStore& weights, const std::string& name) const;

  ModelConfig config_;
  ModelOptions options_;
  float norm_offset_;
  const DecoderModel& trunk_;
  vt::Tensor fc_, embedding_norm_, hidden_norm_, final_norm_, input_layernorm_, post_attention_layernorm_;
  std::optional<dense_attn::AttnBlock> attn_;
  std::optional<GatedMlp> mlp_;
  std::optional<SparseMoe> moe_;
};

}  // namespace vllm

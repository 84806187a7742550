// Speculative decoding with Qwen3.5's MTP head (vLLM's MTP proposer,
// vllm/v1/spec_decode): after each step, the head drafts k tokens per request from
// the trunk's hidden states; the next step verifies them in one forward.
//
//   step s:   trunk forward over the scheduled tokens (keeping the final hidden states)
//             -> sample / verify -> tokens produced (accepted drafts + one more)
//   Propose:  MTP head over every row whose next token is now known (hidden h_i, token
//             t_{i+1}, at position i; it writes the head's KV at i), argmax of the last
//             valid row -> draft 1; drafts 2..k: the head again at the next position
//             from its own output hidden state and the previous draft (vLLM reuses its
//             one layer the same way).
//
// Drafts are greedy; the runner's verification (rejection sampling against the
// target's distribution, Sampler::VerifyDraft) keeps the output exactly the target
// model's. The head's attention layer has its own KV pages: one more full-attention
// layer in the caches (cache_spec), addressed through each request's block table;
// the scheduler allocates num_speculative_tokens lookahead slots for drafts 2..k.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_executor/models/mtp_head.h"
#include "vllm/worker/input_batch.h"

namespace vllm {

class MtpProposer {
 public:
  // `head` drafts for `trunk` (both outlive nothing here but the proposer);
  // `mtp_kv_layer` is the head's entry in ModelCaches::kv.
  MtpProposer(const DecoderModel& trunk, std::unique_ptr<MtpHead> head, int64_t num_speculative_tokens,
              int64_t mtp_kv_layer);

  int64_t num_speculative_tokens() const { return num_speculative_tokens_; }
  const DecoderModel& trunk() const { return trunk_; }

  // The trunk's forward, keeping its final hidden states for Propose (and, when
  // record_gdn, every GDN layer's projected inputs for ReplayGdnStates). Logits
  // [N, V] f32 at batch.logits_indices.
  vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches& caches, bool record_gdn);
  // Rows `rows` of the last Forward's GDN inputs replayed into meta's sequences.
  void ReplayGdnStates(const vt::Tensor& rows, const AttnMetadata& meta, const ModelCaches& caches) const;

  // Drafts after the last Forward over `batch`. produced[b]: the tokens request b got
  // this step (its accepted drafts, then the sampled one; empty when it sampled
  // nothing). Requests with drafts[b] set get up to num_speculative_tokens drafts
  // (fewer where their block table ends); the head's KV is written for every row
  // whose next token is known, drafting or not.
  std::unordered_map<std::string, std::vector<int32_t>> Propose(const InputBatch& batch,
                                                                const std::vector<std::vector<int32_t>>& produced,
                                                                const std::vector<bool>& drafts,
                                                                const ModelCaches& caches, int64_t block_size);

 private:
  const DecoderModel& trunk_;
  std::unique_ptr<MtpHead> head_;
  int64_t num_speculative_tokens_;
  int64_t mtp_kv_layer_;
  vt::Tensor hidden_;                     // [T, H] of the last Forward
  std::vector<vt::Tensor> gdn_projected_;  // per trunk layer, when recorded
};

}  // namespace vllm

// The model runner's speculative steps (model_runner.h, spec_decode/mtp_proposer.h).
//
// A request verifying d drafts computes its last known token and the drafts in one
// chunk; rows 0..d of its logits give the tokens after them. Verification accepts
// drafts while they agree with what the target samples at their row (greedy: the
// argmax; sampled: Sampler::VerifyDraft's rejection rule), then keeps the target's
// token at the first disagreement, or at row d when every draft was accepted.
//
// Attention needs nothing more (rejected positions are rewritten later: the
// scheduler's num_computed_tokens drops by the rejected drafts). A Gated DeltaNet
// state, though, has advanced over every draft: before the forward each verifying
// request's state is copied to a backup slot, and when drafts were rejected it is
// copied back and advanced over the accepted rows again from the forward's own
// projected inputs (DecoderModel::ReplayGdnStates: the conv and the delta rule, no
// projection), so it ends exactly on the last accepted token.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "vllm/worker/model_runner.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "worker/packed_upload.h"

namespace vllm {

std::vector<SampleResult> ModelRunner::AcceptGreedy(const BatchRequest& s, const int64_t* row_tokens) {
  std::vector<SampleResult> out;
  for (int64_t i = 0; i <= s.num_draft_tokens(); ++i) {
    out.push_back({.token_id = static_cast<int32_t>(row_tokens[i]), .logprobs = {}});
    if (i == s.num_draft_tokens() || row_tokens[i] != s.draft_token_ids[i]) break;
  }
  return out;
}

std::vector<SampleResult> ModelRunner::Verify(const BatchRequest& s, const float* rows, int64_t vocab) {
  // Penalties, bad words and min_tokens see the accepted drafts as output: a copy of
  // the request takes them as they are accepted.
  Request scratch = s.request();
  std::vector<SampleResult> out;
  for (int64_t i = 0; i < s.num_draft_tokens(); ++i) {
    bool accepted = false;
    out.push_back(sampler_.VerifyDraft(rows + i * vocab, vocab, scratch, s.draft_token_ids[i], accepted));
    if (!accepted) return out;
    scratch.AppendOutputToken(s.draft_token_ids[i]);
  }
  out.push_back(sampler_.Sample(rows + s.num_draft_tokens() * vocab, vocab, scratch));
  return out;
}

void ModelRunner::BackUpVerifyingStates(const InputBatch& batch) const {
  int32_t backup = 0;
  for (const BatchRequest& s : batch.requests) {
    if (s.num_draft_tokens() == 0 || s.state_slot() < 0) continue;
    if (backup == speculative_->num_backup_slots) {
      throw std::logic_error("ModelRunner: more requests verify drafts than the " +
                             std::to_string(speculative_->num_backup_slots) + " state backup slots");
    }
    CopyStates(caches_.gdn, s.state_slot(), caches_.gdn, speculative_->backup_slot_base + backup++);
  }
}

void ModelRunner::RollBackRejectedDrafts(const InputBatch& batch, const std::vector<std::vector<int32_t>>& produced) {
  std::vector<int32_t> rows, query_start_loc = {0}, slots;
  int64_t max_rows = 0, trunk_row = 0;
  int32_t backup = 0;
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const BatchRequest& s = batch.requests[b];
    const int64_t first_row = trunk_row;
    trunk_row += s.num_scheduled_tokens;
    if (s.num_draft_tokens() == 0 || s.state_slot() < 0) continue;
    const int32_t slot_backup = speculative_->backup_slot_base + backup++;
    const int64_t kept = static_cast<int64_t>(produced[b].size());  // the last known token and the accepted drafts
    if (kept == s.num_draft_tokens() + 1) continue;                 // all accepted: the state is right
    CopyStates(caches_.gdn, slot_backup, caches_.gdn, s.state_slot());
    for (int64_t i = 0; i < kept; ++i) rows.push_back(static_cast<int32_t>(first_row + i));
    query_start_loc.push_back(static_cast<int32_t>(rows.size()));
    slots.push_back(s.state_slot());
    max_rows = std::max(max_rows, kept);
  }
  if (slots.empty()) return;
  vt::reach::Hit("ModelRunner::RollBackRejectedDrafts");
  PackedUpload packed;
  const int64_t at_rows = packed.Add(rows), at_qsl = packed.Add(query_start_loc), at_slots = packed.Add(slots);
  packed.Upload(model_.device());
  const int64_t B = static_cast<int64_t>(slots.size()), T = static_cast<int64_t>(rows.size());
  AttnMetadata meta;
  meta.query_start_loc = packed.Take(at_qsl, {B + 1});
  meta.state_slot_ids = packed.Take(at_slots, {B});
  meta.num_tokens = T;
  meta.num_seqs = B;
  meta.num_decodes = max_rows == 1 ? B : 0;
  meta.max_query_len = max_rows;
  speculative_->proposer->ReplayGdnStates(packed.Take(at_rows, {T}), meta, caches_);
}

std::vector<std::vector<int32_t>> ModelRunner::ProducedTokens(const InputBatch& batch, const RunnerOutput& output) {
  std::vector<std::vector<int32_t>> produced(batch.requests.size());
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const std::string& id = batch.requests[b].req_id();
    if (auto v = output.verified.find(id); v != output.verified.end()) {
      for (const SampleResult& r : v->second) produced[b].push_back(r.token_id);
    } else if (auto t = output.sampled.find(id); t != output.sampled.end()) {
      produced[b].push_back(t->second.token_id);
    }
  }
  return produced;
}

RunnerOutput ModelRunner::ExecuteSpeculative(InputBatch batch, const SchedulerOutput& output) {
  vt::reach::Hit("ModelRunner::Speculative");
  const auto start = std::chrono::steady_clock::now();
  const int64_t num_running = static_cast<int64_t>(requests_.size());
  bool verifies = false, decodes_only = true;
  for (const BatchRequest& s : batch.requests) {
    verifies = verifies || s.num_draft_tokens() > 0;
    decodes_only = decodes_only && (s.num_draft_tokens() > 0 || s.num_scheduled_tokens == 1);
  }
  std::optional<StepLogits> step;
  RunnerOutput result;
  const InputBatch* ran = &batch;
  if (SamplesByArgmaxOnly(batch)) {
    result = ExecuteGreedy(batch);
  } else {
    vt::reach::Hit("ModelRunner::HostSampler");
    step = RunModel(std::move(batch), output);
    result = SampleTokens(*step);
    ran = &step->batch;
  }
  const std::vector<std::vector<int32_t>> produced = ProducedTokens(*ran, result);
  RollBackRejectedDrafts(*ran, produced);
  // Requests with a grammar never draft (their mask for a draft's row would need the
  // grammar advanced over the earlier drafts); nor does anyone while the batch is
  // larger than disable_by_batch_size, or, without it, where DraftPolicy measured
  // that drafting does not pay.
  const std::optional<int64_t> limit = speculative_->disable_by_batch_size;
  const bool batch_allows = limit ? *limit <= 0 || num_running <= *limit : draft_policy_.ShouldDraft(num_running);
  std::vector<bool> drafts(ran->requests.size());
  for (size_t b = 0; b < drafts.size(); ++b) {
    drafts[b] = batch_allows && !ran->requests[b].request().sampling_params.structured_outputs;
  }
  // When nobody drafts, the head does not run at all (a large batch then costs what it
  // costs without speculation); the positions computed meanwhile have no head KV, which
  // makes later drafts of those requests less likely to be accepted, never wrong.
  const bool drafted = std::find(drafts.begin(), drafts.end(), true) != drafts.end();
  if (drafted) result.draft_token_ids = speculative_->proposer->Propose(*ran, produced, drafts, caches_, block_size_);
  if (!limit && decodes_only) {
    int64_t tokens = 0;
    for (const std::vector<int32_t>& p : produced) tokens += static_cast<int64_t>(p.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    draft_policy_.Record(num_running, verifies, drafted, seconds, tokens);
  }
  return result;
}

}  // namespace vllm

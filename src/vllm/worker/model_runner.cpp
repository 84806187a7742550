#include "vllm/worker/model_runner.h"

#include <algorithm>
#include <stdexcept>

#include "vllm/model_executor/models/model_registry.h"
#include "vt/ops.h"

namespace vllm {
namespace {

// Which rows of this chunk feed logits: every row when the request wants prompt
// logprobs and the chunk still scores prompt tokens, else the last row if it samples.
bool WantsPromptLogprobs(const ScheduledRequest& s) {
  const Request& r = *s.request;
  return r.sampling_params.prompt_logprobs.has_value() && s.num_computed_tokens + 1 < r.num_prompt_tokens();
}

vt::Tensor Upload(const std::vector<int32_t>& values, const vt::Shape& shape, vt::Device device) {
  vt::Tensor host = vt::Tensor::FromVector(values, shape);
  return device.type == vt::DeviceType::kCPU ? host : host.To(device);
}

}  // namespace

ModelRunner::ModelRunner(const Model& model, ModelCaches caches, int64_t block_size, uint64_t seed)
    : model_(model), caches_(std::move(caches)), block_size_(block_size), sampler_(seed) {}

ForwardBatch ModelRunner::PrepareBatch(const SchedulerOutput& output) const {
  const int64_t B = static_cast<int64_t>(output.scheduled.size());
  std::vector<int32_t> input_ids, positions, slot_mapping, seq_lens, query_start_loc = {0}, slots, logits_rows;
  int64_t max_blocks = 1, max_query_len = 0, max_seq_len = 0;
  for (const ScheduledRequest& s : output.scheduled) max_blocks = std::max<int64_t>(max_blocks, s.block_ids.size());
  std::vector<int32_t> block_tables(B * max_blocks, 0);  // padded with the null block
  for (int64_t b = 0; b < B; ++b) {
    const ScheduledRequest& s = output.scheduled[b];
    const int64_t q_len = static_cast<int64_t>(s.token_ids.size()), seq_len = s.num_computed_tokens + q_len;
    if (seq_len > static_cast<int64_t>(s.block_ids.size()) * block_size_) {
      throw std::logic_error("ModelRunner: request '" + s.req_id + "' has " + std::to_string(seq_len) +
                             " tokens but only " + std::to_string(s.block_ids.size()) + " blocks");
    }
    const int64_t row0 = static_cast<int64_t>(input_ids.size());
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t pos = s.num_computed_tokens + i;
      input_ids.push_back(s.token_ids[i]);
      positions.push_back(static_cast<int32_t>(pos));
      slot_mapping.push_back(static_cast<int32_t>(s.block_ids[pos / block_size_] * block_size_ + pos % block_size_));
    }
    std::copy(s.block_ids.begin(), s.block_ids.end(), block_tables.begin() + b * max_blocks);
    seq_lens.push_back(static_cast<int32_t>(seq_len));
    query_start_loc.push_back(static_cast<int32_t>(input_ids.size()));
    slots.push_back(s.state_slot);
    if (WantsPromptLogprobs(s)) {
      for (int64_t i = 0; i < q_len; ++i) logits_rows.push_back(static_cast<int32_t>(row0 + i));
    } else if (s.samples) {
      logits_rows.push_back(static_cast<int32_t>(row0 + q_len - 1));
    }
    max_query_len = std::max(max_query_len, q_len);
    max_seq_len = std::max(max_seq_len, seq_len);
  }
  const int64_t T = static_cast<int64_t>(input_ids.size());
  const vt::Device dev = model_.device();
  ForwardBatch batch;
  batch.input_ids = Upload(input_ids, {T}, dev);
  batch.logits_indices = Upload(logits_rows, {static_cast<int64_t>(logits_rows.size())}, dev);
  AttnMetadata& m = batch.attn;
  m.positions = Upload(positions, {T}, dev);
  m.slot_mapping = Upload(slot_mapping, {T}, dev);
  m.block_tables = Upload(block_tables, {B, max_blocks}, dev);
  m.seq_lens = Upload(seq_lens, {B}, dev);
  m.query_start_loc = Upload(query_start_loc, {B + 1}, dev);
  m.state_slot_ids = Upload(slots, {B}, dev);
  m.num_tokens = T;
  m.num_seqs = B;
  m.num_decodes = output.num_decodes;
  m.max_query_len = max_query_len;
  m.max_seq_len = max_seq_len;
  return batch;
}

void ModelRunner::ResetStateSlots(const SchedulerOutput& output) const {
  for (const ScheduledRequest& s : output.scheduled) {
    if (!s.is_new_sequence || s.state_slot < 0) continue;
    for (const LayerGdnState& state : caches_.gdn) {
      if (!state.conv_states.defined()) continue;
      vt::Fill({.dst = state.conv_states.Select(0, s.state_slot), .value = 0.0});
      vt::Fill({.dst = state.ssm_states.Select(0, s.state_slot), .value = 0.0});
    }
  }
}

RunnerOutput ModelRunner::Execute(const SchedulerOutput& output) {
  RunnerOutput result;
  if (output.empty()) return result;
  ResetStateSlots(output);
  ForwardBatch batch = PrepareBatch(output);
  vt::Tensor logits = ModelRegistry::Forward(model_, batch, caches_);  // [N, V] f32
  vt::Tensor host = logits.device().type == vt::DeviceType::kCPU ? logits : logits.To(vt::kCpu);
  const int64_t V = host.size(1);
  const float* rows = host.data_ptr<float>();
  int64_t row = 0;
  for (const ScheduledRequest& s : output.scheduled) {
    const Request& r = *s.request;
    const int64_t q_len = static_cast<int64_t>(s.token_ids.size());
    if (WantsPromptLogprobs(s)) {
      // Row i (position p = num_computed + i) scores prompt token p + 1.
      PromptLogprobsChunk chunk;
      chunk.first_position = s.num_computed_tokens + 1;
      const int k = *r.sampling_params.prompt_logprobs;
      for (int64_t i = 0; i < q_len && s.num_computed_tokens + i + 1 < r.num_prompt_tokens(); ++i) {
        std::vector<float> lp = LogSoftmax(rows + (row + i) * V, V);
        TokenLogprobs entry = TopLogprobs(lp, k);
        const int32_t actual = r.prompt_token_ids[s.num_computed_tokens + i + 1];
        if (std::none_of(entry.begin(), entry.end(), [&](const auto& e) { return e.first == actual; })) {
          entry.emplace_back(actual, lp[actual]);
        }
        chunk.entries.push_back(std::move(entry));
      }
      result.prompt_logprobs[s.req_id] = std::move(chunk);
      if (s.samples) result.sampled[s.req_id] = sampler_.Sample(rows + (row + q_len - 1) * V, V, r);
      row += q_len;
    } else if (s.samples) {
      result.sampled[s.req_id] = sampler_.Sample(rows + row * V, V, r);
      ++row;
    }
  }
  return result;
}

}  // namespace vllm

#include "vllm/worker/model_runner.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "vllm/model_executor/models/model_registry.h"
#include "worker/packed_upload.h"
#include "vllm/structured_output/tokenizer_info.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vllm {
namespace {

// Whether this chunk still scores prompt tokens for a request asking for prompt
// logprobs (then every row of the chunk feeds logits).
bool WantsPromptLogprobs(const BatchRequest& s) {
  const Request& r = s.request();
  return r.sampling_params.prompt_logprobs.has_value() && s.num_computed_tokens() + 1 < r.num_prompt_tokens();
}

// Host-side metadata of one varlen batch, before upload (forward_batch.h).
struct HostBatch {
  std::vector<int32_t> input_ids, positions, slot_mapping, seq_lens, query_start_loc = {0}, slots, logits_rows;
  std::vector<int32_t> block_tables;  // [B, max_blocks], padded with the null block 0
  int64_t max_blocks = 1, max_query_len = 0, max_seq_len = 0;
};

void AddSequence(const BatchRequest& s, int64_t b, int64_t block_size, HostBatch& h) {
  const std::span<const int32_t> tokens = s.token_ids();  // then the drafts
  const std::vector<int32_t>& blocks = s.block_ids();
  const int64_t known = static_cast<int64_t>(tokens.size());
  const int64_t q_len = s.num_scheduled_tokens, seq_len = s.num_computed_tokens() + q_len;
  if (seq_len > static_cast<int64_t>(blocks.size()) * block_size) {
    throw std::logic_error("ModelRunner: request '" + s.req_id() + "' has " + std::to_string(seq_len) +
                           " tokens but only " + std::to_string(blocks.size()) + " blocks of " +
                           std::to_string(block_size));
  }
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t pos = s.num_computed_tokens() + i;
    h.input_ids.push_back(i < known ? tokens[i] : s.draft_token_ids[i - known]);
    h.positions.push_back(static_cast<int32_t>(pos));
    h.slot_mapping.push_back(static_cast<int32_t>(blocks[pos / block_size] * block_size + pos % block_size));
  }
  std::copy(blocks.begin(), blocks.end(), h.block_tables.begin() + b * h.max_blocks);
  h.seq_lens.push_back(static_cast<int32_t>(seq_len));
  h.query_start_loc.push_back(static_cast<int32_t>(h.input_ids.size()));
  h.slots.push_back(s.state_slot());
  h.max_query_len = std::max(h.max_query_len, q_len);
  h.max_seq_len = std::max(h.max_seq_len, seq_len);
}

}  // namespace

int32_t GrammarBitmask::RowOf(const std::string& req_id) const {
  if (output_ == nullptr) return -1;
  const auto found = output_->structured_output_request_ids.find(req_id);
  return found == output_->structured_output_request_ids.end() ? -1 : found->second;
}

std::span<const uint32_t> GrammarBitmask::Row(int32_t row) const {
  if (output_->await_grammar_bitmask) output_->await_grammar_bitmask();
  const size_t words = static_cast<size_t>(output_->grammar_bitmask_words);
  return std::span<const uint32_t>(output_->grammar_bitmask).subspan(static_cast<size_t>(row) * words, words);
}

ModelRunner::ModelRunner(const Model& model, ModelCaches caches, int64_t block_size, uint64_t seed,
                         std::optional<DecodeGraphOptions> decode_graphs,
                         std::optional<SpeculativeDecoding> speculative)
    : model_(model), caches_(std::move(caches)), block_size_(block_size), sampler_(seed),
      speculative_(std::move(speculative)) {
  if (speculative_ && &speculative_->proposer->trunk() != &model_) {
    throw std::logic_error("ModelRunner: the MTP proposer drafts for another model than the runner's");
  }
  if (decode_graphs) decode_graphs_ = std::make_unique<DecodeGraphs>(model_, caches_, block_size_, *decode_graphs);
}

const CachedRequestState* ModelRunner::request_state(const std::string& req_id) const {
  auto it = requests_.find(req_id);
  return it == requests_.end() ? nullptr : &it->second;
}

void ModelRunner::AddNewRequest(const NewRequestData& d) {
  Request request(d.req_id, d.prompt_token_ids, d.sampling_params, d.eos_token_ids, /*arrival_order=*/0);
  const bool added =
      requests_
          .try_emplace(d.req_id, CachedRequestState{.request = std::move(request),
                                                    .block_ids = d.block_ids,
                                                    .state_slot = d.state_slot,
                                                    .num_computed_tokens = d.num_computed_tokens})
          .second;
  if (!added) throw std::logic_error("ModelRunner: new request '" + d.req_id + "' is already known");
}

void ModelRunner::ApplyCachedRequest(const CachedRequestData& d) {
  auto it = requests_.find(d.req_id);
  if (it == requests_.end()) {
    throw std::logic_error("ModelRunner: cached request '" + d.req_id + "' was never sent as a new request");
  }
  CachedRequestState& state = it->second;
  for (int32_t token : d.new_token_ids) state.request.AppendOutputToken(token);
  if (d.resumed_from_preemption) {
    state.block_ids = d.new_block_ids;
    state.state_slot = d.state_slot;
  } else {
    if (d.state_slot != -1) {
      throw std::logic_error("ModelRunner: request '" + d.req_id + "' was given state slot " +
                             std::to_string(d.state_slot) + " without being resumed from preemption");
    }
    state.block_ids.insert(state.block_ids.end(), d.new_block_ids.begin(), d.new_block_ids.end());
  }
  state.num_computed_tokens = d.num_computed_tokens;
}

InputBatch ModelRunner::UpdateStates(const SchedulerOutput& output) {
  for (const std::string& id : output.finished_req_ids) {
    requests_.erase(id);
    sampler_.Release(id);
  }
  for (const NewRequestData& d : output.scheduled_new_reqs) AddNewRequest(d);
  for (const CachedRequestData& d : output.scheduled_cached_reqs) ApplyCachedRequest(d);
  InputBatch batch;
  for (const CachedRequestData& d : output.scheduled_cached_reqs) {
    batch.requests.push_back({.state = &requests_.at(d.req_id), .is_new_sequence = d.resumed_from_preemption});
  }
  for (const NewRequestData& d : output.scheduled_new_reqs) {
    batch.requests.push_back({.state = &requests_.at(d.req_id), .is_new_sequence = true});
  }
  for (BatchRequest& b : batch.requests) {
    auto n = output.num_scheduled_tokens.find(b.req_id());
    b.num_scheduled_tokens = n == output.num_scheduled_tokens.end() ? 0 : n->second;
    if (auto drafts = output.scheduled_spec_decode_tokens.find(b.req_id());
        drafts != output.scheduled_spec_decode_tokens.end()) {
      b.draft_token_ids = drafts->second;
      if (!speculative_) throw std::logic_error("ModelRunner: request '" + b.req_id() + "' has drafts to verify, but the runner has no speculative decoding");
    }
    const int64_t known = b.request().num_tokens();
    if (b.num_known_scheduled_tokens() < 1 || b.num_computed_tokens() + b.num_known_scheduled_tokens() > known ||
        (b.num_draft_tokens() > 0 && !b.samples())) {
      throw std::logic_error("ModelRunner: request '" + b.req_id() + "' is scheduled for " +
                             std::to_string(b.num_scheduled_tokens) + " tokens after " +
                             std::to_string(b.num_computed_tokens()) + " computed, of the " + std::to_string(known) +
                             " it has");
    }
  }
  if (static_cast<int64_t>(output.num_scheduled_tokens.size()) != batch.size()) {
    throw std::logic_error("ModelRunner: num_scheduled_tokens names " +
                           std::to_string(output.num_scheduled_tokens.size()) + " requests, the output sends " +
                           std::to_string(batch.size()));
  }
  while (batch.num_decodes < batch.size() && batch.requests[batch.num_decodes].num_scheduled_tokens == 1) {
    ++batch.num_decodes;
  }
  batch.state_snapshot_loads = output.state_snapshot_loads;
  batch.state_snapshot_saves = output.state_snapshot_saves;
  return batch;
}

std::vector<LogitsRows> ModelRunner::PlanLogitsRows(const InputBatch& batch) {
  std::vector<LogitsRows> plan;
  int64_t row = 0;
  for (const BatchRequest& s : batch.requests) {
    const int64_t q_len = s.num_scheduled_tokens;
    LogitsRows r{.first_row = row, .num_rows = 0, .first_position = s.num_computed_tokens() + q_len - 1};
    if (WantsPromptLogprobs(s)) {
      r.num_rows = q_len;
      r.first_position = s.num_computed_tokens();
    } else if (s.num_draft_tokens() > 0) {
      // The last known token and each draft: rows of the tokens after them.
      r.num_rows = 1 + s.num_draft_tokens();
      r.first_position = s.num_computed_tokens() + q_len - r.num_rows;
    } else if (s.samples()) {
      r.num_rows = 1;
    }
    row += r.num_rows;
    plan.push_back(r);
  }
  return plan;
}

ForwardBatch ModelRunner::PrepareBatch(const InputBatch& batch) const {
  return PrepareBatch(batch, PlanLogitsRows(batch));
}

ForwardBatch ModelRunner::PrepareBatch(const InputBatch& input, const std::vector<LogitsRows>& plan) const {
  const int64_t B = input.size();
  HostBatch h;
  for (const BatchRequest& s : input.requests) {
    h.max_blocks = std::max<int64_t>(h.max_blocks, static_cast<int64_t>(s.block_ids().size()));
  }
  h.block_tables.assign(B * h.max_blocks, 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = static_cast<int64_t>(h.input_ids.size());
    AddSequence(input.requests[b], b, block_size_, h);
    const int64_t q_len = static_cast<int64_t>(h.input_ids.size()) - row0;
    // A request's logits rows are the last num_rows tokens of its chunk.
    for (int64_t i = q_len - plan[b].num_rows; i < q_len; ++i) h.logits_rows.push_back(static_cast<int32_t>(row0 + i));
  }
  const int64_t T = static_cast<int64_t>(h.input_ids.size());
  const vt::Device dev = model_.device();
  PackedUpload packed;
  const int64_t input_ids = packed.Add(h.input_ids), logits_rows = packed.Add(h.logits_rows);
  const int64_t positions = packed.Add(h.positions), slot_mapping = packed.Add(h.slot_mapping);
  const int64_t block_tables = packed.Add(h.block_tables), seq_lens = packed.Add(h.seq_lens);
  const int64_t query_start_loc = packed.Add(h.query_start_loc), slots = packed.Add(h.slots);
  packed.Upload(dev);
  ForwardBatch batch;
  batch.input_ids = packed.Take(input_ids, {T});
  batch.logits_indices = packed.Take(logits_rows, {static_cast<int64_t>(h.logits_rows.size())});
  AttnMetadata& m = batch.attn;
  m.positions = packed.Take(positions, {T});
  m.slot_mapping = packed.Take(slot_mapping, {T});
  m.block_tables = packed.Take(block_tables, {B, h.max_blocks});
  m.seq_lens = packed.Take(seq_lens, {B});
  m.query_start_loc = packed.Take(query_start_loc, {B + 1});
  m.state_slot_ids = packed.Take(slots, {B});
  m.num_tokens = T;
  m.num_seqs = B;
  m.num_decodes = input.num_decodes;
  m.max_query_len = h.max_query_len;
  m.max_seq_len = h.max_seq_len;
  return batch;
}

void ModelRunner::CopyStates(const std::vector<LayerGdnState>& from, int32_t from_index,
                             const std::vector<LayerGdnState>& to, int32_t to_index) const {
  for (size_t i = 0; i < from.size(); ++i) {
    if (!from[i].conv_states.defined()) continue;
    vt::Copy({.src = from[i].conv_states.Select(0, from_index), .dst = to[i].conv_states.Select(0, to_index)});
    vt::Copy({.src = from[i].ssm_states.Select(0, from_index), .dst = to[i].ssm_states.Select(0, to_index)});
  }
}

void ModelRunner::ResetStateSlots(const InputBatch& batch) const {
  for (const BatchRequest& s : batch.requests) {
    if (!s.is_new_sequence || s.state_slot() < 0) continue;
    const auto load = std::find_if(batch.state_snapshot_loads.begin(), batch.state_snapshot_loads.end(),
                                   [&](const StateSnapshotCopy& c) { return c.state_slot == s.state_slot(); });
    if (load != batch.state_snapshot_loads.end()) {
      // A prefix hit: the state after the hit's tokens, from its snapshot.
      CopyStates(caches_.gdn_snapshots, load->snapshot, caches_.gdn, s.state_slot());
      continue;
    }
    for (const LayerGdnState& state : caches_.gdn) {
      if (!state.conv_states.defined()) continue;
      vt::Fill({.dst = state.conv_states.Select(0, s.state_slot()), .value = 0.0});
      vt::Fill({.dst = state.ssm_states.Select(0, s.state_slot()), .value = 0.0});
    }
  }
}

void ModelRunner::SaveStateSnapshots(const InputBatch& batch) const {
  for (const StateSnapshotCopy& c : batch.state_snapshot_saves) {
    CopyStates(caches_.gdn, c.state_slot, caches_.gdn_snapshots, c.snapshot);
  }
}

vt::Tensor ModelRunner::Forward(const InputBatch& batch, const std::vector<LogitsRows>& rows) {
  ResetStateSlots(batch);
  const ForwardBatch forward = PrepareBatch(batch, rows);
  num_tokens_computed_ += forward.attn.num_tokens;
  vt::Tensor logits;  // [N, V] f32 on the model's device
  if (speculative_) {
    const bool verifies = std::any_of(batch.requests.begin(), batch.requests.end(),
                                      [](const BatchRequest& s) { return s.num_draft_tokens() > 0; });
    if (verifies) BackUpVerifyingStates(batch);
    logits = speculative_->proposer->Forward(forward, caches_, verifies);
  } else {
    logits = ModelRegistry::Forward(model_, forward, caches_);
  }
  SaveStateSnapshots(batch);
  return logits;
}

StepLogits ModelRunner::ExecuteModel(const SchedulerOutput& output) { return RunModel(UpdateStates(output), output); }

StepLogits ModelRunner::RunModel(InputBatch batch, const SchedulerOutput& output) {
  StepLogits step;
  step.batch = std::move(batch);
  step.grammar = GrammarBitmask(output);
  step.rows = PlanLogitsRows(step.batch);
  if (step.batch.empty()) {
    step.logits = vt::Tensor::Empty({0, model_.vocab_size()}, vt::DType::kF32, vt::kCpu);
    return step;
  }
  const vt::Tensor logits = Forward(step.batch, step.rows);
  step.logits = logits.device().type == vt::DeviceType::kCPU ? logits : logits.To(vt::kCpu);
  return step;
}

bool ModelRunner::SamplesByArgmaxOnly(const InputBatch& batch) {
  return std::all_of(batch.requests.begin(), batch.requests.end(), [](const BatchRequest& s) {
    return !WantsPromptLogprobs(s) && (!s.samples() || Sampler::IsPlainGreedy(s.request()));
  });
}

bool ModelRunner::SamplesByMaskedArgmax(const InputBatch& batch) {
  bool any_grammar = false;
  for (const BatchRequest& s : batch.requests) {
    if (WantsPromptLogprobs(s)) return false;
    if (!s.samples() || Sampler::IsPlainGreedy(s.request())) continue;
    if (!Sampler::IsGreedyUnderGrammarOnly(s.request()) || s.num_draft_tokens() > 0) return false;
    any_grammar = true;
  }
  return any_grammar;
}

vt::HostUpload& ModelRunner::UploadFor(std::unique_ptr<vt::HostUpload>& upload, vt::Device device) {
  if (!upload || upload->device() != device) upload = std::make_unique<vt::HostUpload>(device);
  return *upload;
}

vt::Tensor ModelRunner::BitmaskRows(const InputBatch& batch, const GrammarBitmask& grammar, int64_t num_rows,
                                    int64_t vocab, const std::function<int64_t(size_t)>& row_of, bool request_masks,
                                    std::unique_ptr<vt::HostUpload>& upload, vt::Device device) {
  std::span<uint32_t> bits;
  const int64_t grammar_words = grammar.words_per_row();
  const int64_t words = std::max(grammar_words, (vocab + 31) / 32);
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const Request& request = batch.requests[b].request();
    const int32_t row = grammar.RowOf(batch.requests[b].req_id());
    const bool masked = request_masks && Sampler::HasDeviceMask(request);
    const int64_t at = row < 0 && !masked ? -1 : row_of(b);
    if (at < 0) continue;
    if (bits.empty()) {
      bits = UploadFor(upload, device).Stage<uint32_t>(static_cast<size_t>(num_rows * words));
      std::fill(bits.begin(), bits.end(), ~uint32_t{0});
    }
    const std::span<uint32_t> mine = bits.subspan(static_cast<size_t>(at * words), static_cast<size_t>(words));
    if (row >= 0) {  // tokens past the grammar's words are none it allows
      std::memcpy(mine.data(), grammar.Row(row).data(), grammar_words * sizeof(uint32_t));
      std::fill(mine.begin() + grammar_words, mine.end(), 0u);
    }
    if (masked) Sampler::ApplyDeviceMask(request, mine, vocab);
  }
  if (bits.empty()) return {};
  vt::Tensor allowed = vt::Tensor::Empty({num_rows, words}, vt::DType::kI32, device);
  upload->Upload(allowed);
  return allowed;
}

vt::Tensor ModelRunner::GrammarRows(const InputBatch& batch, const GrammarBitmask& grammar, int64_t num_rows,
                                    const std::function<int64_t(size_t)>& row_of, vt::Device device) {
  return BitmaskRows(batch, grammar, num_rows, model_.vocab_size(), row_of, false, grammar_upload_, device);
}

ModelRunner::DrawMasks ModelRunner::DrawMasksFor(const InputBatch& batch, const GrammarBitmask& grammar,
                                                 int64_t num_rows, const std::function<int64_t(size_t)>& row_of,
                                                 vt::Device device) {
  DrawMasks masks;
  masks.logprobs = GrammarRows(batch, grammar, num_rows, row_of, device);
  masks.sample = masks.logprobs;
  const bool any = std::ranges::any_of(batch.requests, [](const BatchRequest& s) {
    return s.samples() && Sampler::HasDeviceMask(s.request());
  });
  if (!any) return masks;
  masks.sample = BitmaskRows(batch, grammar, num_rows, model_.vocab_size(), row_of, true, sample_mask_upload_, device);
  if (masks.sample.defined()) vt::reach::Hit("ModelRunner::SampleMasksOnDevice");
  return masks;
}

vt::Tensor ModelRunner::GrammarRowsOnDevice(const InputBatch& batch, const std::vector<LogitsRows>& rows,
                                             const GrammarBitmask* grammar, const vt::Tensor& logits) {
  if (!grammar) return {};
  vt::Tensor allowed = GrammarRows(batch, *grammar, logits.size(0), LastRowOf(rows), logits.device());
  if (allowed.defined()) vt::reach::Hit("ModelRunner::GrammarBitmaskOnDevice");
  return allowed;
}

std::function<int64_t(size_t)> ModelRunner::LastRowOf(const std::vector<LogitsRows>& rows) {
  return [&rows](size_t b) { return rows[b].num_rows == 0 ? int64_t{-1} : rows[b].first_row + rows[b].num_rows - 1; };
}

RunnerOutput ModelRunner::ExecuteGreedy(const InputBatch& batch, const GrammarBitmask* grammar) {
  vt::reach::Hit("ModelRunner::ArgmaxOnDevice");
  const std::vector<LogitsRows> rows = PlanLogitsRows(batch);
  const vt::Tensor logits = Forward(batch, rows);  // [N, V]
  RunnerOutput result;
  if (logits.size(0) == 0) return result;
  const vt::Tensor ids = vt::Tensor::Empty({logits.size(0)}, vt::DType::kI32, logits.device());  // [N]
  const vt::Tensor allowed = GrammarRowsOnDevice(batch, rows, grammar, logits);  // [N, words] or none
  vt::Argmax({.x = logits, .out = ids, .allowed = allowed});
  const std::vector<int64_t> tokens = ids.ToIntVector();
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const BatchRequest& s = batch.requests[b];
    if (rows[b].num_rows == 0) continue;
    if (s.num_draft_tokens() > 0) {
      result.verified[s.req_id()] = AcceptGreedy(s, tokens.data() + rows[b].first_row);
    } else {
      result.sampled[s.req_id()].token_id = static_cast<int32_t>(tokens[rows[b].first_row]);
    }
  }
  return result;
}

bool ModelRunner::SamplesOnDeviceOnly(const InputBatch& batch) {
  return std::all_of(batch.requests.begin(), batch.requests.end(), [](const BatchRequest& s) {
    return !WantsPromptLogprobs(s) &&
           (!s.samples() || (s.num_draft_tokens() == 0 && Sampler::SamplesOnDevice(s.request())));
  });
}

RunnerOutput ModelRunner::ExecuteWithDeviceSampler(InputBatch batch, const GrammarBitmask& grammar) {
  vt::reach::Hit("ModelRunner::DeviceSampler");
  StepLogits step;
  step.rows = PlanLogitsRows(batch);
  const vt::Tensor logits = Forward(batch, step.rows);  // [N, V]
  const int64_t N = logits.size(0);
  // Rows no request samples from on the device stay greedy (their ids are dropped).
  DeviceDrawRows draw(N);
  std::vector<bool> on_device(batch.requests.size(), false);
  bool host_work = false;
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const BatchRequest& s = batch.requests[b];
    host_work = host_work || WantsPromptLogprobs(s);
    if (!s.samples() || step.rows[b].num_rows == 0) continue;
    if (s.num_draft_tokens() > 0 || !Sampler::SamplesOnDevice(s.request())) {
      host_work = true;
      continue;
    }
    on_device[b] = true;
    draw.Set(step.rows[b].first_row + step.rows[b].num_rows - 1, s.request(), sampler_.DeviceSampleRow(s.request()));
  }
  DeviceDraws drawn;
  if (N > 0) {
    const DrawMasks masks = DrawMasksFor(batch, grammar, N, LastRowOf(step.rows), logits.device());
    if (masks.logprobs.defined()) vt::reach::Hit("ModelRunner::GrammarBitmaskOnDevice");
    drawn = DrawOnDevice(logits, draw, masks);
  }
  RunnerOutput result;
  step.batch = std::move(batch);
  if (host_work) {
    // Prompt logprobs and requests the device does not sample for: their rows on the host.
    step.grammar = grammar;
    step.logits = logits.To(vt::kCpu);
    result = SampleTokens(step, &on_device);
  }
  for (size_t b = 0; b < step.batch.requests.size(); ++b) {
    if (!on_device[b]) continue;
    const int64_t row = step.rows[b].first_row + step.rows[b].num_rows - 1;
    SampleResult& sampled = result.sampled[step.batch.requests[b].req_id()];
    sampled.token_id = static_cast<int32_t>(drawn.tokens[row]);
    if (draw.logprobs[row] >= 0) sampled.logprobs = drawn.Logprobs(row, draw.logprobs[row]);
  }
  return result;
}

void ModelRunner::PenalizeOnDevice(const vt::Tensor& logits, const std::vector<const Request*>& penalized) {
  const Sampler::PenaltyRows p = Sampler::DevicePenaltyRows(penalized);
  if (p.length == 0) return;
  vt::reach::Hit("ModelRunner::PenaltiesOnDevice");
  const int64_t N = p.rows, L = p.length;
  std::ranges::copy(p.ids, UploadFor(penalty_ids_upload_, logits.device()).Stage<int32_t>(p.ids.size()).begin());
  std::ranges::copy(p.params,
                    UploadFor(penalty_params_upload_, logits.device()).Stage<float>(p.params.size()).begin());
  const vt::Tensor ids = vt::Tensor::Empty({N * L + N}, vt::DType::kI32, logits.device());
  penalty_ids_upload_->Upload(ids);
  const vt::Tensor params = vt::Tensor::Empty({N, 3}, vt::DType::kF32, logits.device());
  penalty_params_upload_->Upload(params);
  vt::Penalties({.x = logits,
                 .token_ids = ids.Slice(0, 0, N * L).View({N, L}),
                 .output_begin = ids.Slice(0, N * L, N * L + N),
                 .params = params});
}

void ModelRunner::DeviceDrawRows::Set(int64_t n, const Request& r, const vt::SampleRow& sample) {
  const auto i = static_cast<size_t>(n);
  params[i] = sample;
  penalized[i] = Sampler::HasPenalties(r) ? &r : nullptr;
  logprobs[i] = Sampler::DeviceLogprobs(r);
  biased[i] = Sampler::HasDeviceBias(r) ? &r : nullptr;
}

void ModelRunner::BiasOnDevice(const vt::Tensor& logits, const std::vector<const Request*>& biased) {
  std::vector<int64_t> rows;
  for (size_t n = 0; n < biased.size(); ++n) {
    if (biased[n] != nullptr) rows.push_back(static_cast<int64_t>(n));
  }
  if (rows.empty()) return;
  vt::reach::Hit("ModelRunner::LogitBiasOnDevice");
  const int64_t V = logits.size(1), B = static_cast<int64_t>(rows.size());
  std::span<float> staged = UploadFor(bias_upload_, logits.device()).Stage<float>(static_cast<size_t>(B * V));
  for (int64_t i = 0; i < B; ++i) {
    const std::span<float> row = staged.subspan(static_cast<size_t>(i * V), static_cast<size_t>(V));
    Sampler::DeviceBiasRow(*biased[static_cast<size_t>(rows[i])], row);
  }
  const vt::Tensor bias = vt::Tensor::Empty({B, V}, vt::DType::kF32, logits.device());
  bias_upload_->Upload(bias);
  for (int64_t i = 0; i < B; ++i) {
    const vt::Tensor row = logits.Slice(0, rows[i], rows[i] + 1);
    vt::Add({.a = row, .b = bias.Slice(0, i, i + 1), .out = row});
  }
}

TokenLogprobs ModelRunner::DeviceDraws::Logprobs(int64_t row, int k) const {
  return Sampler::LogprobsFromDeviceRow(logprob_ids.data() + row * columns, logprob_values.data() + row * columns, k);
}

ModelRunner::DeviceDraws ModelRunner::DrawOnDevice(const vt::Tensor& logits, const DeviceDrawRows& rows,
                                                   const DrawMasks& masks) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const int max_logprobs = rows.logprobs.empty() ? -1 : std::ranges::max(rows.logprobs);
  vt::Tensor raw = logits;  // the logits the logprobs are taken from
  const auto any = [](const std::vector<const Request*>& v) {
    return std::ranges::any_of(v, [](const Request* r) { return r != nullptr; });
  };
  if (max_logprobs >= 0 && (any(rows.penalized) || any(rows.biased))) {
    raw = vt::Tensor::Empty(logits.shape(), vt::DType::kF32, logits.device());
    vt::Copy({.src = logits, .dst = raw});
  }
  BiasOnDevice(logits, rows.biased);  // the host's order: logit_bias, then penalties
  PenalizeOnDevice(logits, rows.penalized);
  const vt::Tensor ids = vt::Tensor::Empty({N}, vt::DType::kI32, logits.device());
  vt::HostUpload& upload = UploadFor(sample_params_upload_, logits.device());
  std::ranges::copy(rows.params, upload.Stage<vt::SampleRow>(rows.params.size()).begin());  // Sample's words
  const vt::Tensor params = vt::Tensor::Empty({N, vt::kSampleRowWords}, vt::DType::kI32, logits.device());
  upload.Upload(params);
  vt::Sample({.x = logits, .params = params, .out = ids, .allowed = masks.sample});
  DeviceDraws out;
  if (max_logprobs >= 0) {
    vt::reach::Hit("ModelRunner::LogprobsOnDevice");
    out.columns = 1 + std::min<int64_t>(max_logprobs, V);
    const vt::Tensor top_ids = vt::Tensor::Empty({N, out.columns}, vt::DType::kI32, logits.device());
    const vt::Tensor top_values = vt::Tensor::Empty({N, out.columns}, vt::DType::kF32, logits.device());
    vt::TopLogprobs({.x = raw, .token = ids, .allowed = masks.logprobs, .ids = top_ids, .values = top_values});
    out.logprob_ids = top_ids.ToIntVector();
    out.logprob_values = top_values.ToFloatVector();
  }
  out.tokens = ids.ToIntVector();
  return out;
}

std::optional<RunnerOutput> ModelRunner::ExecuteGraph(const InputBatch& batch, const GrammarBitmask& grammar) {
  const std::optional<vt::Tensor> logits = decode_graphs_->Run(batch);  // [B, V], queued
  if (!logits) return std::nullopt;
  vt::reach::Hit("ModelRunner::DecodeGraph");
  DeviceDrawRows draw(batch.size());
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    const Request& r = batch.requests[b].request();
    draw.Set(static_cast<int64_t>(b), r, sampler_.DeviceSampleRow(r));
  }
  // The grammar's rows of this batch's requests (all ones for the others), if any,
  // filled by the host while the graph runs, and the requests' own masks.
  const DrawMasks masks = DrawMasksFor(
      batch, grammar, batch.size(), [](size_t b) { return static_cast<int64_t>(b); }, logits->device());
  if (masks.logprobs.defined()) vt::reach::Hit("ModelRunner::GrammarBitmaskInGraph");
  const DeviceDraws drawn = DrawOnDevice(*logits, draw, masks);
  num_tokens_computed_ += batch.size();
  SaveStateSnapshots(batch);
  RunnerOutput result;
  for (size_t b = 0; b < batch.requests.size(); ++b) {
    SampleResult& sampled = result.sampled[batch.requests[b].req_id()];
    sampled.token_id = static_cast<int32_t>(drawn.tokens[b]);
    if (draw.logprobs[b] >= 0) sampled.logprobs = drawn.Logprobs(static_cast<int64_t>(b), draw.logprobs[b]);
  }
  return result;
}

std::optional<DecodeGraphs::CaptureSummary> ModelRunner::CaptureDecodeGraphs() {
  if (!decode_graphs_) return std::nullopt;
  return decode_graphs_->CaptureAll();
}

RunnerOutput ModelRunner::SampleTokens(const StepLogits& step, const std::vector<bool>* sampled_elsewhere) {
  RunnerOutput result;
  const int64_t V = step.logits.size(1);
  const float* rows = step.logits.data_ptr<float>();
  for (size_t b = 0; b < step.batch.requests.size(); ++b) {
    const BatchRequest& s = step.batch.requests[b];
    const Request& r = s.request();
    const LogitsRows& plan = step.rows.at(b);
    if (plan.num_rows == 0) continue;
    const float* last = rows + (plan.first_row + plan.num_rows - 1) * V;
    if (WantsPromptLogprobs(s)) {
      // Row i (position p = first_position + i) scores prompt token p + 1.
      PromptLogprobsChunk chunk;
      chunk.first_position = plan.first_position + 1;
      const int k = *r.sampling_params.prompt_logprobs;
      for (int64_t i = 0; i < plan.num_rows && plan.first_position + i + 1 < r.num_prompt_tokens(); ++i) {
        std::vector<float> lp = LogSoftmax(rows + (plan.first_row + i) * V, V);
        TokenLogprobs entry = TopLogprobs(lp, k);
        const int32_t actual = r.prompt_token_ids[plan.first_position + i + 1];
        if (std::none_of(entry.begin(), entry.end(), [&](const auto& e) { return e.first == actual; })) {
          entry.emplace_back(actual, lp[actual]);
        }
        chunk.entries.push_back(std::move(entry));
      }
      result.prompt_logprobs[s.req_id()] = std::move(chunk);
    }
    if (!s.samples() || (sampled_elsewhere && (*sampled_elsewhere)[b])) continue;
    const int32_t grammar_row = step.grammar.RowOf(s.req_id());
    if (s.num_draft_tokens() > 0) {
      if (grammar_row >= 0) {
        throw std::logic_error("ModelRunner: request '" + s.req_id() + "' has a grammar and drafts (it never drafts)");
      }
      result.verified[s.req_id()] = Verify(s, rows + plan.first_row * V, V);
      continue;
    }
    if (grammar_row < 0) {
      result.sampled[s.req_id()] = sampler_.Sample(last, V, r);
      continue;
    }
    vt::reach::Hit("ModelRunner::GrammarBitmask");
    std::vector<float> masked(last, last + V);
    structured_output::ApplyTokenBitmask(masked, step.grammar.Row(grammar_row));
    result.sampled[s.req_id()] = sampler_.Sample(masked.data(), V, r);
  }
  return result;
}

RunnerOutput ModelRunner::Execute(const SchedulerOutput& output) {
  InputBatch batch = UpdateStates(output);
  if (batch.empty()) return {};
  if (speculative_) return ExecuteSpeculative(std::move(batch), output);
  // Grammars' bitmask rows go to the device, not the logits to the host (64 rows of a
  // 248k vocabulary are 64 MB a step).
  const GrammarBitmask grammar(output);
  if (decode_graphs_ && SamplesOnDeviceOnly(batch) && decode_graphs_->Accepts(batch)) {
    std::optional<RunnerOutput> replayed = ExecuteGraph(batch, grammar);
    if (replayed) return std::move(*replayed);
  }
  if (SamplesByArgmaxOnly(batch)) return ExecuteGreedy(batch);
  if (SamplesByMaskedArgmax(batch)) return ExecuteGreedy(batch, &grammar);
  // A GPU draws every other request's token too (vt::Sample), unless it needs the host.
  if (model_.device().type != vt::DeviceType::kCPU) return ExecuteWithDeviceSampler(std::move(batch), grammar);
  vt::reach::Hit("ModelRunner::HostSampler");
  return SampleTokens(RunModel(std::move(batch), output));
}

}  // namespace vllm

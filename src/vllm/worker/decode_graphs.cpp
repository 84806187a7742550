#include "vllm/worker/decode_graphs.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "vllm/model_executor/models/model_registry.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vllm {
namespace {

constexpr int64_t kSmallestContextBucket = 512;  // the attention takes one plan for every context up to here

int64_t NextPowerOfTwo(int64_t n, int64_t at_least) {
  int64_t p = at_least;
  while (p < n) p *= 2;
  return p;
}

// Offsets of PackInputs' arrays for `shape` (see decode_graphs.h).
struct InputLayout {
  int64_t input_ids, logits_rows, positions, slot_mapping, seq_lens, query_start_loc, state_slots, block_tables,
      sample_rows, total;
  explicit InputLayout(const DecodeGraphShape& s) {
    const int64_t P = s.batch;
    input_ids = 0;
    logits_rows = P;
    positions = 2 * P;
    slot_mapping = 3 * P;
    seq_lens = 4 * P;
    query_start_loc = 5 * P;
    state_slots = 6 * P + 1;
    block_tables = 7 * P + 1;
    sample_rows = block_tables + P * s.table_width;
    total = sample_rows + P * vt::kSampleRowWords;
  }
};

}  // namespace

DecodeGraphs::DecodeGraphs(const Model& model, const ModelCaches& caches, int64_t block_size,
                           DecodeGraphOptions options)
    : model_(model), caches_(caches), block_size_(block_size), options_(options) {
  if (options_.max_batch < 1 || options_.max_model_len < 1 || block_size_ < 1) {
    throw std::invalid_argument("DecodeGraphs: max_batch " + std::to_string(options_.max_batch) +
                                ", max_model_len " + std::to_string(options_.max_model_len) + " and block_size " +
                                std::to_string(block_size_) + " must be >= 1");
  }
  for (const LayerGdnState& state : caches_.gdn) {
    if (!state.ssm_states.defined()) continue;
    if (options_.padding_state_slot < 0 || options_.padding_state_slot >= state.ssm_states.size(0)) {
      throw std::invalid_argument("DecodeGraphs: padding_state_slot " + std::to_string(options_.padding_state_slot) +
                                  " is not a recurrent-state slot of the caches (" +
                                  std::to_string(state.ssm_states.size(0)) + " slots)");
    }
  }
}

bool DecodeGraphs::Accepts(const InputBatch& batch) const {
  const int64_t B = batch.size();
  if (B < 1 || B > options_.max_batch) return false;
  return std::all_of(batch.requests.begin(), batch.requests.end(), [&](const BatchRequest& s) {
    return s.num_scheduled_tokens == 1 && !s.is_new_sequence && s.samples() &&
           s.num_computed_tokens() + 1 <= options_.max_model_len &&
           s.num_computed_tokens() + 1 <= static_cast<int64_t>(s.block_ids().size()) * block_size_;
  });
}

DecodeGraphShape DecodeGraphs::ShapeFor(const InputBatch& batch, int64_t mask_words) const {
  int64_t longest = 1;
  for (const BatchRequest& s : batch.requests) longest = std::max(longest, s.num_computed_tokens() + 1);
  DecodeGraphShape shape;
  shape.batch = std::min(NextPowerOfTwo(batch.size(), 1), options_.max_batch);
  shape.max_seq_len = std::min(NextPowerOfTwo(longest, kSmallestContextBucket), options_.max_model_len);
  shape.table_width = (shape.max_seq_len + block_size_ - 1) / block_size_;
  shape.mask_words = mask_words;
  return shape;
}

std::vector<int32_t> DecodeGraphs::PackInputs(const InputBatch* batch, const DecodeGraphShape& shape,
                                              const std::vector<vt::SampleRow>& sample_rows) const {
  const InputLayout at(shape);
  const int64_t P = shape.batch, W = shape.table_width;
  std::vector<int32_t> v(static_cast<size_t>(at.total), 0);  // padding: token 0, position 0, slot 0 of block 0
  for (int64_t r = 0; r < P; ++r) {
    v[at.logits_rows + r] = static_cast<int32_t>(r);
    v[at.seq_lens + r] = 1;
    v[at.query_start_loc + r + 1] = static_cast<int32_t>(r + 1);
    v[at.state_slots + r] = options_.padding_state_slot;
  }
  std::vector<vt::SampleRow> rows(static_cast<size_t>(P), vt::SampleRow{.temperature = 0.0f});  // padding: greedy
  const int64_t B = batch ? batch->size() : 0;
  if (static_cast<int64_t>(sample_rows.size()) != B) {
    throw std::logic_error("DecodeGraphs::PackInputs: " + std::to_string(sample_rows.size()) +
                           " sampling rows for a batch of " + std::to_string(B));
  }
  std::copy(sample_rows.begin(), sample_rows.end(), rows.begin());
  const std::vector<int32_t> words = vt::SampleRowWords(rows);
  std::copy(words.begin(), words.end(), v.begin() + at.sample_rows);
  for (int64_t r = 0; r < B; ++r) {
    const BatchRequest& s = batch->requests[r];
    const std::vector<int32_t>& block_ids = s.block_ids();
    const int64_t pos = s.num_computed_tokens();
    v[at.input_ids + r] = s.token_ids()[0];
    v[at.positions + r] = static_cast<int32_t>(pos);
    v[at.slot_mapping + r] = static_cast<int32_t>(block_ids[pos / block_size_] * block_size_ + pos % block_size_);
    v[at.seq_lens + r] = static_cast<int32_t>(pos + 1);
    v[at.state_slots + r] = s.state_slot();
    const int64_t blocks = std::min<int64_t>(W, static_cast<int64_t>(block_ids.size()));
    std::copy(block_ids.begin(), block_ids.begin() + blocks, v.begin() + at.block_tables + r * W);
  }
  return v;
}

ForwardBatch DecodeGraphs::BatchViews(const vt::Tensor& inputs, const DecodeGraphShape& shape) const {
  const InputLayout at(shape);
  const int64_t P = shape.batch;
  auto view = [&](int64_t offset, const vt::Shape& dims) {
    return inputs.Slice(0, offset, offset + vt::NumElements(dims)).View(dims);
  };
  ForwardBatch batch;
  batch.input_ids = view(at.input_ids, {P});
  batch.logits_indices = view(at.logits_rows, {P});
  AttnMetadata& m = batch.attn;
  m.positions = view(at.positions, {P});
  m.slot_mapping = view(at.slot_mapping, {P});
  m.seq_lens = view(at.seq_lens, {P});
  m.query_start_loc = view(at.query_start_loc, {P + 1});
  m.state_slot_ids = view(at.state_slots, {P});
  m.block_tables = view(at.block_tables, {P, shape.table_width});
  m.num_tokens = m.num_seqs = m.num_decodes = P;
  m.max_query_len = 1;
  m.max_seq_len = shape.max_seq_len;
  return batch;
}

vt::Tensor DecodeGraphs::SampleRowsView(const vt::Tensor& inputs, const DecodeGraphShape& shape) const {
  const InputLayout at(shape);
  return inputs.Slice(0, at.sample_rows, at.total).View({shape.batch, vt::kSampleRowWords});
}

DecodeGraphs::Graph DecodeGraphs::Capture(const DecodeGraphShape& shape) {
  vt::reach::Hit("DecodeGraphs::Capture");
  const vt::Device device = model_.device();
  if (!memory_) memory_ = vt::NewGraphMemory(device);
  Graph g;
  const std::vector<int32_t> padding = PackInputs(nullptr, shape, {});
  g.inputs = vt::Tensor::FromVector(padding, {static_cast<int64_t>(padding.size())}).To(device);
  g.batch = BatchViews(g.inputs, shape);
  const vt::Tensor sample_rows = SampleRowsView(g.inputs, shape);
  if (shape.mask_words > 0) {  // every index allowed until a replay writes the rows
    g.allowed = vt::Tensor::Empty({shape.batch, shape.mask_words}, vt::DType::kI32, device);
    vt::Fill({.dst = g.allowed, .value = -1.0});
  }
  auto forward_and_sample = [&] {
    const vt::Tensor logits = ModelRegistry::Forward(model_, g.batch, caches_);  // [P, V]
    g.tokens = vt::Tensor::Empty({shape.batch}, vt::DType::kI32, device);
    vt::Sample({.x = logits, .params = sample_rows, .out = g.tokens, .allowed = g.allowed});
  };
  forward_and_sample();  // eagerly, on padding rows only: first-use work happens outside the recording
  vt::Synchronize(device);
  g.graph = vt::CaptureGraph(device, memory_, forward_and_sample);
  return g;
}

DecodeGraphs::Graph* DecodeGraphs::GraphFor(const DecodeGraphShape& shape) {
  auto found = graphs_.find(shape);
  if (found != graphs_.end()) return &found->second;
  if (eager_shapes_.count(shape) > 0) return nullptr;
  try {
    return &graphs_.emplace(shape, Capture(shape)).first->second;
  } catch (const vt::Error& e) {
    eager_shapes_.insert(shape);
    last_capture_error_ = "decode graph of batch " + std::to_string(shape.batch) + ", context " +
                          std::to_string(shape.max_seq_len) + (shape.mask_words > 0 ? ", masked" : "") +
                          " not captured (steps of that shape run eagerly): " + e.what();
    return nullptr;
  }
}

std::optional<std::vector<int32_t>> DecodeGraphs::Run(const InputBatch& batch,
                                                      const std::vector<vt::SampleRow>& sample_rows,
                                                      const std::vector<int32_t>* mask_rows, int64_t mask_words) {
  if (!Accepts(batch)) throw std::logic_error("DecodeGraphs::Run: the batch is not a graph-able decode batch");
  const int64_t B = batch.size();
  if (mask_rows && (mask_words < 1 || static_cast<int64_t>(mask_rows->size()) != B * mask_words)) {
    throw std::logic_error("DecodeGraphs::Run: " + std::to_string(mask_rows->size()) + " mask words for " +
                           std::to_string(B) + " rows of " + std::to_string(mask_words));
  }
  const DecodeGraphShape shape = ShapeFor(batch, mask_rows ? mask_words : 0);
  Graph* g = GraphFor(shape);
  if (g == nullptr) return std::nullopt;
  const std::vector<int32_t> inputs = PackInputs(&batch, shape, sample_rows);
  g->inputs.CopyFrom(vt::Tensor::FromVector(inputs, {static_cast<int64_t>(inputs.size())}));
  if (mask_rows) {  // the padding rows keep their ones
    g->allowed.Slice(0, 0, B).CopyFrom(vt::Tensor::FromVector(*mask_rows, {B, mask_words}));
  }
  g->graph->Replay();
  const std::vector<int64_t> tokens = g->tokens.ToIntVector();
  std::vector<int32_t> result(batch.requests.size());
  for (size_t r = 0; r < result.size(); ++r) result[r] = static_cast<int32_t>(tokens[r]);
  return result;
}

}  // namespace vllm

#include "vllm/worker/decode_graphs.h"

#include <algorithm>
#include <chrono>
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
      total;
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
    total = block_tables + P * s.table_width;
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

DecodeGraphShape DecodeGraphs::ShapeFor(const InputBatch& batch) const {
  int64_t longest = 1;
  for (const BatchRequest& s : batch.requests) longest = std::max(longest, s.num_computed_tokens() + 1);
  DecodeGraphShape shape;
  shape.batch = std::min(NextPowerOfTwo(batch.size(), 1), options_.max_batch);
  shape.max_seq_len = std::min(NextPowerOfTwo(longest, kSmallestContextBucket), options_.max_model_len);
  shape.table_width = (shape.max_seq_len + block_size_ - 1) / block_size_;
  return shape;
}

std::vector<DecodeGraphShape> DecodeGraphs::StartupShapes() const {
  std::vector<int64_t> batches, contexts;
  for (int64_t p = 1; p < options_.max_batch; p *= 2) batches.push_back(p);
  batches.push_back(options_.max_batch);
  for (int64_t s = kSmallestContextBucket; s < options_.max_model_len; s *= 2) contexts.push_back(s);
  contexts.push_back(options_.max_model_len);
  std::vector<DecodeGraphShape> shapes;
  for (int64_t p : batches) {
    for (int64_t s : contexts) shapes.push_back({.batch = p, .max_seq_len = s, .table_width = (s + block_size_ - 1) / block_size_});
  }
  return shapes;
}

DecodeGraphs::CaptureSummary DecodeGraphs::CaptureAll() {
  const auto start = std::chrono::steady_clock::now();
  CaptureSummary summary;
  for (const DecodeGraphShape& shape : StartupShapes()) summary.failed += GraphFor(shape) == nullptr;
  summary.captured = static_cast<int64_t>(graphs_.size());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (summary.failed > 0) summary.error = last_capture_error_;
  return summary;
}

std::vector<int32_t> DecodeGraphs::PackInputs(const InputBatch* batch, const DecodeGraphShape& shape) const {
  const InputLayout at(shape);
  const int64_t P = shape.batch, W = shape.table_width;
  std::vector<int32_t> v(static_cast<size_t>(at.total), 0);  // padding: token 0, position 0, slot 0 of block 0
  for (int64_t r = 0; r < P; ++r) {
    v[at.logits_rows + r] = static_cast<int32_t>(r);
    v[at.seq_lens + r] = 1;
    v[at.query_start_loc + r + 1] = static_cast<int32_t>(r + 1);
    v[at.state_slots + r] = options_.padding_state_slot;
  }
  const int64_t B = batch ? batch->size() : 0;
  if (B > P) {
    throw std::logic_error("DecodeGraphs::PackInputs: a batch of " + std::to_string(B) + " for a shape of " +
                           std::to_string(P) + " rows");
  }
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

DecodeGraphs::Graph DecodeGraphs::Capture(const DecodeGraphShape& shape) {
  vt::reach::Hit("DecodeGraphs::Capture");
  const vt::Device device = model_.device();
  if (!memory_) memory_ = vt::NewGraphMemory(device);
  Graph g;
  const std::vector<int32_t> padding = PackInputs(nullptr, shape);
  g.inputs = vt::Tensor::FromVector(padding, {static_cast<int64_t>(padding.size())}).To(device);
  g.batch = BatchViews(g.inputs, shape);
  // Eagerly, on padding rows only: first-use work happens outside the recording.
  const vt::Tensor warm = ModelRegistry::Forward(model_, g.batch, caches_);  // [P, V]
  if (!logits_.defined()) logits_ = vt::Tensor::Empty({options_.max_batch, warm.size(1)}, warm.dtype(), device);
  vt::Synchronize(device);
  g.graph = vt::CaptureGraph(device, memory_, [&] {
    // The forward's own logits are the capture's memory, free for the next graph's.
    vt::Copy({.src = ModelRegistry::Forward(model_, g.batch, caches_), .dst = logits_.Slice(0, 0, shape.batch)});
  });
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
                          std::to_string(shape.max_seq_len) + " not captured (steps of that shape run eagerly): " + e.what();
    return nullptr;
  }
}

std::optional<vt::Tensor> DecodeGraphs::Run(const InputBatch& batch) {
  if (!Accepts(batch)) throw std::logic_error("DecodeGraphs::Run: the batch is not a graph-able decode batch");
  const DecodeGraphShape shape = ShapeFor(batch);
  Graph* g = GraphFor(shape);
  if (g == nullptr) return std::nullopt;
  const std::vector<int32_t> inputs = PackInputs(&batch, shape);
  g->inputs.CopyFrom(vt::Tensor::FromVector(inputs, {static_cast<int64_t>(inputs.size())}));
  g->graph->Replay();
  return logits_.Slice(0, 0, batch.size());
}

}  // namespace vllm

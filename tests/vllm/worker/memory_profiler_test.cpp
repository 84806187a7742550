// Memory profiling (src/vllm/worker/memory_profiler.cpp) on the CPU, whose
// allocator counts like the GPU's: the dummy steps have the shapes the engine can
// schedule (exact batch metadata), and the peak covers what the forward allocated.
#include <gtest/gtest.h>

#include <vector>

#include "vllm/worker/memory_profiler.h"
#include "vt/device.h"
#include "vt/tensor.h"

namespace vllm {
namespace {

constexpr int64_t kVocab = 16, kScratchFloatsPerToken = 1000;

// What a forward saw, copied to host vectors (outside the allocator's counts, so a
// kept batch does not shift the next profile's baseline).
struct SeenBatch {
  std::vector<int64_t> query_start_loc, positions, seq_lens, block_tables, state_slot_ids, logits_indices;
  vt::Shape block_tables_shape;
  int64_t num_decodes = 0;
};

// Allocates kScratchFloatsPerToken f32 per token besides its logits, and keeps the
// last batch it saw.
class ScratchModel final : public Model {
 public:
  int64_t vocab_size() const override { return kVocab; }
  vt::Device device() const override { return vt::kCpu; }
  vt::DType activation_dtype() const override { return vt::DType::kF32; }
  std::vector<LayerCacheSpec> cache_spec() const override {
    return {{.kind = LayerCacheSpec::Kind::kFullAttention, .num_kv_heads = 1, .head_dim = 4},
            {.kind = LayerCacheSpec::Kind::kGatedDeltaNet, .conv_dim = 3, .conv_kernel = 4, .num_value_heads = 1,
             .key_head_dim = 2, .value_head_dim = 2}};
  }
  vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches&) const override {
    const AttnMetadata& m = batch.attn;
    last_batch = {.query_start_loc = m.query_start_loc.ToIntVector(),
                  .positions = m.positions.ToIntVector(),
                  .seq_lens = m.seq_lens.ToIntVector(),
                  .block_tables = m.block_tables.ToIntVector(),
                  .state_slot_ids = m.state_slot_ids.ToIntVector(),
                  .logits_indices = batch.logits_indices.ToIntVector(),
                  .block_tables_shape = m.block_tables.shape(),
                  .num_decodes = m.num_decodes};
    const vt::Tensor scratch = vt::Tensor::Zeros({m.num_tokens, kScratchFloatsPerToken}, vt::DType::kF32, vt::kCpu);
    return vt::Tensor::Zeros({batch.logits_indices.size(0), kVocab}, vt::DType::kF32, vt::kCpu);
  }
  mutable SeenBatch last_batch;
};

TEST(MemoryProfilerTest, ThePrefillStepSplitsItsTokensOverItsSequences) {
  ScratchModel model;
  const int64_t peak = ProfileActivationPeak(model, 4, vt::DType::kF32, {.num_tokens = 10, .num_seqs = 3});
  const int64_t forward_bytes = 10 * kScratchFloatsPerToken * 4 + 3 * kVocab * 4;
  EXPECT_GE(peak, forward_bytes);
  EXPECT_LE(peak, forward_bytes + 4096) << "batch metadata and allocator headers only";
  const SeenBatch& m = model.last_batch;
  EXPECT_EQ(m.query_start_loc, (std::vector<int64_t>{0, 4, 7, 10}));
  EXPECT_EQ(m.positions, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(m.block_tables, (std::vector<int64_t>{1, 1, 1}));  // the one block every sequence writes
  EXPECT_EQ(m.state_slot_ids, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(m.logits_indices, (std::vector<int64_t>{3, 6, 9}));  // every sequence samples
}

TEST(MemoryProfilerTest, TheDecodeStepRunsSingleTokensAfterALongContext) {
  ScratchModel model;
  ProfileActivationPeak(model, 4, vt::DType::kF32, {.num_tokens = 4, .num_seqs = 4, .num_computed_tokens = 100});
  const SeenBatch& m = model.last_batch;
  EXPECT_EQ(m.num_decodes, 4);
  EXPECT_EQ(m.positions, (std::vector<int64_t>{100, 100, 100, 100}));
  EXPECT_EQ(m.seq_lens, (std::vector<int64_t>{101, 101, 101, 101}));
  EXPECT_EQ(m.block_tables_shape, (vt::Shape{4, 26}));
  EXPECT_THROW(ProfileActivationPeak(model, 4, vt::DType::kF32, {.num_tokens = 2, .num_seqs = 3}),
               std::invalid_argument);
}

// Weights are what is live before profiling; the activation peak is the larger
// step's; graphs get twice the decode step's.
TEST(MemoryProfilerTest, TheProfileSeparatesWeightsActivationsAndGraphs) {
  ScratchModel model;
  const vt::Tensor weights = vt::Tensor::Zeros({1 << 16}, vt::DType::kF32, vt::kCpu);
  const size_t live = vt::GetDeviceBackend(vt::DeviceType::kCPU).GetMemoryStats(0).allocated_bytes;
  const ProfileLimits limits{.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 32,
                             .decode_graphs = true};
  const DeviceMemoryProfile p = ProfileDeviceMemory(model, 4, vt::DType::kF32, limits);
  EXPECT_EQ(p.weights_bytes, static_cast<int64_t>(live));
  EXPECT_EQ(p.profiled_tokens, 64);
  EXPECT_EQ(p.profiled_logits_rows, 8);
  EXPECT_GE(p.activation_peak_bytes, 64 * kScratchFloatsPerToken * 4 + 8 * kVocab * 4);
  EXPECT_LT(p.activation_peak_bytes, 65 * kScratchFloatsPerToken * 4 + 8 * kVocab * 4);
  EXPECT_GE(p.graph_bytes, 2 * (8 * kScratchFloatsPerToken * 4 + 8 * kVocab * 4));
  EXPECT_LT(p.graph_bytes, p.activation_peak_bytes) << "the decode step is 8 tokens, the prefill 64";
  EXPECT_GT(p.total_bytes, 0);
  EXPECT_EQ(ProfileDeviceMemory(model, 4, vt::DType::kF32, {.max_num_batched_tokens = 64, .max_num_seqs = 8,
                                                            .max_model_len = 32})
                .graph_bytes,
            0);
}

}  // namespace
}  // namespace vllm

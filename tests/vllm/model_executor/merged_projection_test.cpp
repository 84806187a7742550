// MergedProjection and the layers that own one (gdn::GdnBlock, dense_attn::AttnBlock,
// GatedMlp): merging projections that read one input into one MatMul computes each
// output column as the same dot product. The engine merges only off the CPU; here
// MergePolicy::kAlways forces the merged path on the CPU and every output (and
// cache/state) is compared with the separate path, at every CPU ISA level, for f32,
// bf16 and q8_0 weights and for a mix of dtypes (which must fall back to one MatMul
// per part).
//
// Bitwise where the CPU MatMul guarantees it: with M <= 4 rows (decode, the GEMV
// path) every column is one weight row walked by the same kernel whatever N is.
// With more rows (the GEMM path) a column's f32 sum over K is split into 1, 2 or 4
// accumulator chains depending on the size of the register tile it falls in, and
// that depends on the column's place among N: merged and separate may then differ
// by the reassociation of one f32 sum (a few ulps), checked at f32's 1e-5.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vllm/model_executor/layers/dense_attn.h"
#include "vllm/model_executor/layers/gdn.h"
#include "vllm/model_executor/layers/merged_projection.h"
#include "vllm/model_executor/layers/mlp.h"
#include "vt/error.h"
#include "vt/ops.h"
#include "vt/quant.h"
#include "vt/registry.h"

namespace vllm {
namespace {

using vt::DType;
using vt::Tensor;

const ProjectionPlacement kSeparate{.device = vt::kCpu, .merge = MergePolicy::kOffCpu};
const ProjectionPlacement kMerged{.device = vt::kCpu, .merge = MergePolicy::kAlways};

uint64_t MatMulDispatches() { return vt::Registry::Get().DispatchCount(vt::OpId::kMatMul, vt::DeviceType::kCPU); }

// Random [n, k] weights of `dtype` (quantized row by row for block types), small
// enough that activations stay in a sane range through the layers.
Tensor RandomWeight(int64_t n, int64_t k, DType dtype, std::mt19937& rng) {
  if (!vt::IsQuantized(dtype)) return vt::testing::RandomTensor({n, k}, dtype, vt::kCpu, rng, -0.25f, 0.25f);
  Tensor values = vt::testing::RandomTensor({n, k}, DType::kF32, vt::kCpu, rng, -0.25f, 0.25f);
  Tensor w = Tensor::Empty({n, k}, dtype);
  for (int64_t r = 0; r < n; ++r) {
    vt::QuantizeRow(values.data_ptr<float>() + r * k, k, static_cast<char*>(w.data()) + r * vt::BytesFor(dtype, k),
                    dtype);
  }
  return w;
}

constexpr int64_t kGemvMaxRows = 4;  // src/vt/cpu/kernels/matmul_kernels.h
constexpr double kReassociationTolerance = 1e-5;

// Exact equality of two tensors' values (f32 copies compared as bits: 0 tolerance).
::testing::AssertionResult BitwiseEqual(const Tensor& expected, const Tensor& got) {
  if (expected.shape() != got.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << expected.Describe() << " vs " << got.Describe();
  }
  const std::vector<float> a = expected.ToFloatVector(), b = got.ToFloatVector();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor PoisonedEmpty(const vt::Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  vt::testing::Poison(t);
  return t;
}

// Sequence b owns cache block b + 1 (block_size tokens) and state slot b + 1; it has
// context_lens[b] tokens cached and gets q_lens[b] new ones.
AttnMetadata Batch(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& context_lens, int32_t block_size) {
  std::vector<int32_t> positions, slots, seq_lens, query_start_loc{0}, block_tables, slot_ids;
  int32_t max_query_len = 0, max_seq_len = 0;
  for (size_t b = 0; b < q_lens.size(); ++b) {
    const int32_t block = static_cast<int32_t>(b) + 1, seq_len = context_lens[b] + q_lens[b];
    for (int32_t pos = context_lens[b]; pos < seq_len; ++pos) {
      positions.push_back(pos);
      slots.push_back(block * block_size + pos);
    }
    seq_lens.push_back(seq_len);
    query_start_loc.push_back(query_start_loc.back() + q_lens[b]);
    block_tables.push_back(block);
    slot_ids.push_back(block);
    max_query_len = std::max(max_query_len, q_lens[b]);
    max_seq_len = std::max(max_seq_len, seq_len);
  }
  const int64_t B = static_cast<int64_t>(q_lens.size()), T = static_cast<int64_t>(positions.size());
  return AttnMetadata{.positions = Tensor::FromVector(positions, {T}),
                      .slot_mapping = Tensor::FromVector(slots, {T}),
                      .block_tables = Tensor::FromVector(block_tables, {B, 1}),
                      .seq_lens = Tensor::FromVector(seq_lens, {B}),
                      .query_start_loc = Tensor::FromVector(query_start_loc, {B + 1}),
                      .state_slot_ids = Tensor::FromVector(slot_ids, {B}),
                      .num_tokens = T,
                      .num_seqs = B,
                      .num_decodes = max_query_len == 1 ? B : 0,
                      .max_query_len = max_query_len,
                      .max_seq_len = max_seq_len};
}

// A prompt step of 4 tokens (chunks of 3 and 1: the varlen ops on the GEMV path),
// a decode step of both, and a prompt step of 7 tokens (chunks of 4 and 3: the GEMM
// path, compared with a tolerance; it comes last so the bitwise steps before it
// start from equal states).
const std::vector<AttnMetadata>& ThreeSteps() {
  static const std::vector<AttnMetadata> steps = {Batch({3, 1}, {0, 0}, 8), Batch({1, 1}, {3, 1}, 8),
                                                  Batch({4, 3}, {4, 2}, 8)};
  return steps;
}

// Bitwise on the GEMV path (T <= 4), else within one f32 reassociation.
::testing::AssertionResult SameResult(const Tensor& expected, const Tensor& got, int64_t tokens) {
  if (tokens <= kGemvMaxRows) return BitwiseEqual(expected, got);
  return vt::testing::AllClose(vt::testing::ToDoubles(expected), got, kReassociationTolerance);
}

// Projection weight dtypes of a case: one per part; "mixed" must fall back.
struct DTypeCase {
  const char* name;
  std::vector<DType> parts;
};

std::vector<DTypeCase> DTypeCases(size_t num_parts) {
  std::vector<DType> mixed(num_parts, DType::kF32);
  mixed[0] = DType::kQ8_0;
  return {{"f32", std::vector<DType>(num_parts, DType::kF32)},
          {"bf16", std::vector<DType>(num_parts, DType::kBF16)},
          {"q8_0", std::vector<DType>(num_parts, DType::kQ8_0)},
          {"mixed", mixed}};
}

TEST(MergedProjectionTest, MergesOnlyOffCpuOrWhenForcedAndWhenDTypesAgree) {
  std::mt19937 rng(5);
  auto parts = [&](DType k_dtype) {
    return std::vector<ProjectionPart>{{"q_proj", RandomWeight(24, 64, DType::kF32, rng)},
                                       {"k_proj", RandomWeight(8, 64, k_dtype, rng)},
                                       {"v_proj", RandomWeight(8, 64, DType::kF32, rng)}};
  };
  const MergedProjection on_cpu("test", parts(DType::kF32), kSeparate);
  EXPECT_FALSE(on_cpu.merged());
  EXPECT_EQ(on_cpu.num_matmuls(), 3u);
  const MergedProjection forced("test", parts(DType::kF32), kMerged);
  EXPECT_TRUE(forced.merged());
  EXPECT_EQ(forced.num_matmuls(), 1u);
  EXPECT_EQ(forced.out_features(), 40);
  EXPECT_EQ(forced.begin(1), 24);
  EXPECT_EQ(forced.end(1), 32);
  EXPECT_EQ(forced.end(2), 40);
  const MergedProjection mixed("test", parts(DType::kBF16), kMerged);
  EXPECT_FALSE(mixed.merged());
  EXPECT_EQ(mixed.num_matmuls(), 3u);
  EXPECT_EQ(mixed.out_features(), 40);
}

TEST(MergedProjectionTest, NamesTheBadPart) {
  std::mt19937 rng(6);
  try {
    MergedProjection("gdn::GdnBlock", {{"in_proj_qkv", RandomWeight(4, 8, DType::kF32, rng)}, {"in_proj_z", Tensor()}},
                     kMerged);
    FAIL() << "expected a vt::Error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gdn::GdnBlock: in_proj_z"), std::string::npos) << e.what();
  }
}

// Each part's columns of the merged output equal a MatMul of that part alone.
TEST(MergedProjectionTest, ColumnsEqualSeparateMatMuls) {
  std::mt19937 rng(7);
  const std::vector<int64_t> rows = {19, 5, 3};  // odd, and not multiples of any tile
  for (const DTypeCase& c : DTypeCases(rows.size())) {
    std::vector<ProjectionPart> parts;
    for (size_t i = 0; i < rows.size(); ++i) {
      parts.push_back({"p" + std::to_string(i), RandomWeight(rows[i], 64, c.parts[i], rng)});
    }
    const MergedProjection merged("test", parts, kMerged);
    EXPECT_EQ(merged.merged(), std::string(c.name) != "mixed") << c.name;
    vt::testing::ForEachCpuIsa([&] {
      for (int64_t T : {1, 2, 4, 7, 33}) {
        SCOPED_TRACE(std::string(c.name) + " T " + std::to_string(T));
        const Tensor x = vt::testing::RandomTensor({T, 64}, DType::kF32, vt::kCpu, rng);
        const Tensor out = PoisonedEmpty({T, merged.out_features()});
        merged.Forward(x, out);
        for (size_t i = 0; i < parts.size(); ++i) {
          const Tensor alone = PoisonedEmpty({T, rows[i]});
          vt::MatMul({.x = x, .w = parts[i].weight, .out = alone});
          EXPECT_TRUE(SameResult(alone, merged.Columns(out, i), T)) << "part " << i;
        }
      }
    });
  }
}

// ---- layers --------------------------------------------------------------------

gdn::GdnDims SmallGdnDims() {
  return {.hidden_size = 64, .num_key_heads = 2, .num_value_heads = 4, .key_head_dim = 16, .value_head_dim = 8};
}

gdn::GdnWeights RandomGdnWeights(const gdn::GdnDims& d, const std::vector<DType>& proj, std::mt19937& rng) {
  const int64_t H = d.hidden_size, Hv = d.num_value_heads;
  return {.in_proj_qkv = RandomWeight(d.conv_dim(), H, proj[0], rng),
          .in_proj_z = RandomWeight(d.value_dim(), H, proj[1], rng),
          .in_proj_b = RandomWeight(Hv, H, proj[2], rng),
          .in_proj_a = RandomWeight(Hv, H, proj[3], rng),
          .conv1d = vt::testing::RandomTensor({d.conv_dim(), d.conv_kernel}, DType::kF32, vt::kCpu, rng),
          .A = vt::testing::RandomTensor({Hv}, DType::kF32, vt::kCpu, rng, -1.0f, -0.1f),
          .dt_bias = vt::testing::RandomTensor({Hv}, DType::kF32, vt::kCpu, rng),
          .norm = vt::testing::RandomTensor({d.value_head_dim}, DType::kF32, vt::kCpu, rng, 0.5f, 1.5f),
          .out_proj = RandomWeight(H, d.value_dim(), DType::kF32, rng)};
}

LayerGdnState ZeroGdnState(const gdn::GdnDims& d) {
  return {.conv_states = Tensor::Zeros({3, d.conv_dim(), d.conv_kernel - 1}, DType::kF32),
          .ssm_states = Tensor::Zeros({3, d.num_value_heads, d.key_head_dim, d.value_head_dim}, DType::kF32)};
}

TEST(MergedProjectionLayersTest, GdnBlockMergedEqualsSeparate) {
  std::mt19937 rng(11);
  const gdn::GdnDims dims = SmallGdnDims();
  for (const DTypeCase& c : DTypeCases(4)) {
    const gdn::GdnWeights weights = RandomGdnWeights(dims, c.parts, rng);
    const gdn::GdnBlock separate(dims, weights, kSeparate), merged(dims, weights, kMerged);
    vt::testing::ForEachCpuIsa([&] {
      const LayerGdnState separate_state = ZeroGdnState(dims), merged_state = ZeroGdnState(dims);
      for (const AttnMetadata& step : ThreeSteps()) {
        SCOPED_TRACE(std::string(c.name) + " T " + std::to_string(step.num_tokens));
        const Tensor x = vt::testing::RandomTensor({step.num_tokens, 64}, DType::kF32, vt::kCpu, rng);
        const Tensor expected = PoisonedEmpty({step.num_tokens, 64}), got = PoisonedEmpty({step.num_tokens, 64});
        separate.Forward(x, step, separate_state, expected);
        const uint64_t before = MatMulDispatches();
        merged.Forward(x, step, merged_state, got);
        // in_proj (one, or four when the dtypes differ) + out_proj.
        EXPECT_EQ(MatMulDispatches() - before, std::string(c.name) == "mixed" ? 5u : 2u);
        const int64_t T = step.num_tokens;
        EXPECT_TRUE(SameResult(expected, got, T)) << "out";
        EXPECT_TRUE(SameResult(separate_state.conv_states, merged_state.conv_states, T)) << "conv state";
        EXPECT_TRUE(SameResult(separate_state.ssm_states, merged_state.ssm_states, T)) << "ssm state";
      }
    });
  }
}

struct AttnCase {
  const char* name;
  dense_attn::AttnDims dims;
  bool qk_norm;
};

std::vector<AttnCase> AttnCases() {
  // Qwen3.5-like: output gate, 1 + w norms, partial rotary. Qwen3-like: no gate, plain
  // norms, full rotary (the query is then a strided view of the merged output).
  return {{"gated", {.hidden_size = 64, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16, .rotary_dim = 8,
                     .output_gate = true, .qk_norm_weight_offset = 1.0f}, true},
          {"ungated", {.hidden_size = 64, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16, .rotary_dim = 16}, true},
          {"ungated without norms", {.hidden_size = 64, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16}, false}};
}

dense_attn::AttnWeights RandomAttnWeights(const AttnCase& a, const std::vector<DType>& proj, std::mt19937& rng) {
  const dense_attn::AttnDims& d = a.dims;
  const int64_t H = d.hidden_size, D = d.head_dim;
  dense_attn::AttnWeights w{.q_proj = RandomWeight(d.num_heads * D * (d.output_gate ? 2 : 1), H, proj[0], rng),
                            .k_proj = RandomWeight(d.num_kv_heads * D, H, proj[1], rng),
                            .v_proj = RandomWeight(d.num_kv_heads * D, H, proj[2], rng),
                            .o_proj = RandomWeight(H, d.num_heads * D, DType::kF32, rng)};
  if (a.qk_norm) {
    w.q_norm = vt::testing::RandomTensor({D}, DType::kF32, vt::kCpu, rng);
    w.k_norm = vt::testing::RandomTensor({D}, DType::kF32, vt::kCpu, rng);
  }
  return w;
}

LayerKvCache ZeroKvCache(const dense_attn::AttnDims& d) {
  const vt::Shape shape{4, 8, d.num_kv_heads, d.head_dim};  // [blocks, block_size, Nkv, D]
  return {.k_cache = Tensor::Zeros(shape, DType::kF32), .v_cache = Tensor::Zeros(shape, DType::kF32)};
}

TEST(MergedProjectionLayersTest, AttnBlockMergedEqualsSeparate) {
  std::mt19937 rng(13);
  for (const AttnCase& a : AttnCases()) {
    for (const DTypeCase& c : DTypeCases(3)) {
      const dense_attn::AttnWeights weights = RandomAttnWeights(a, c.parts, rng);
      const dense_attn::AttnBlock separate(a.dims, weights, kSeparate), merged(a.dims, weights, kMerged);
      vt::testing::ForEachCpuIsa([&] {
        const LayerKvCache separate_cache = ZeroKvCache(a.dims), merged_cache = ZeroKvCache(a.dims);
        for (const AttnMetadata& step : ThreeSteps()) {
          SCOPED_TRACE(std::string(a.name) + " " + c.name + " T " + std::to_string(step.num_tokens));
          const Tensor x = vt::testing::RandomTensor({step.num_tokens, 64}, DType::kF32, vt::kCpu, rng);
          const Tensor expected = PoisonedEmpty({step.num_tokens, 64}), got = PoisonedEmpty({step.num_tokens, 64});
          separate.Forward(x, step, separate_cache, expected);
          const uint64_t before = MatMulDispatches();
          merged.Forward(x, step, merged_cache, got);
          EXPECT_EQ(MatMulDispatches() - before, std::string(c.name) == "mixed" ? 4u : 2u);  // qkv + o_proj
          const int64_t T = step.num_tokens;
          EXPECT_TRUE(SameResult(expected, got, T)) << "out";
          EXPECT_TRUE(SameResult(separate_cache.k_cache, merged_cache.k_cache, T)) << "k cache";
          EXPECT_TRUE(SameResult(separate_cache.v_cache, merged_cache.v_cache, T)) << "v cache";
        }
      });
    }
  }
}

TEST(MergedProjectionLayersTest, GatedMlpMergedEqualsSeparate) {
  std::mt19937 rng(17);
  const int64_t H = 64, I = 48;
  for (const DTypeCase& c : DTypeCases(2)) {
    const MlpWeights weights{RandomWeight(I, H, c.parts[0], rng), RandomWeight(I, H, c.parts[1], rng),
                             RandomWeight(H, I, DType::kF32, rng)};
    const GatedMlp separate(weights, kSeparate), merged(weights, kMerged);
    vt::testing::ForEachCpuIsa([&] {
      for (int64_t T : {1, 4, 9}) {
        SCOPED_TRACE(std::string(c.name) + " T " + std::to_string(T));
        const Tensor x = vt::testing::RandomTensor({T, H}, DType::kF32, vt::kCpu, rng);
        const Tensor expected = PoisonedEmpty({T, H}), got = PoisonedEmpty({T, H});
        separate.Forward(x, expected);
        const uint64_t before = MatMulDispatches();
        merged.Forward(x, got);
        EXPECT_EQ(MatMulDispatches() - before, std::string(c.name) == "mixed" ? 3u : 2u);  // gate_up + down
        EXPECT_TRUE(SameResult(expected, got, T));
      }
    });
  }
}

// The layers still name the part whose shape is wrong, before anything is merged.
TEST(MergedProjectionLayersTest, ShapeErrorsNameThePart) {
  std::mt19937 rng(19);
  const AttnCase a = AttnCases()[0];
  dense_attn::AttnWeights weights = RandomAttnWeights(a, {DType::kF32, DType::kF32, DType::kF32}, rng);
  weights.k_proj = RandomWeight(8, 64, DType::kF32, rng);
  try {
    dense_attn::AttnBlock block(a.dims, weights, kMerged);
    FAIL() << "expected a vt::Error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("k_proj must be [32, 64]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vllm

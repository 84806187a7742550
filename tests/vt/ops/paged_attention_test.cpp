// Contract tests of vt::PagedAttention against a double-precision reference: plain
// softmax attention per (sequence, query head, query token) over the positions it
// may see (0 .. seq_len - q_len + i), through shuffled, non-contiguous block
// tables. Unused blocks, unused block-table entries and the slots past each
// sequence's end are NaN, so a read of anything outside the visible context shows
// up in the output. Covers head dims 64/128/256 (and odd ones), batches of 1 to 512
// mixing new prompts, continuing chunks and decodes, GQA ratios 1/2/8, f32 and bf16
// queries and caches, odd block sizes, non-contiguous cache views (interleaved K/V,
// one layer of a larger buffer, head-major storage), strided q/out, split contexts,
// and the host-metadata checks. Every device, and on CPU every ISA level. On GPUs
// each kernel variant is also forced (query tiles, GQA groups), block ids outside
// the cache included (their keys are masked).
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "testing/op_testing.h"
#include "vt/cpu/cpu_features.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

struct SeqSpec {
  int64_t cached = 0;      // context already in the cache
  int64_t new_tokens = 0;  // query tokens of this step (written to the cache too)
};

enum class Layout { kSeparate, kInterleavedKv, kLayerSlice, kHeadMajor };

struct Problem {
  int64_t num_heads = 8, num_kv_heads = 2, head_dim = 64, block_size = 16;
  DType q_dtype = DType::kF32, cache_dtype = DType::kF32;
  Layout layout = Layout::kSeparate;
  bool strided_q_out = false;
  bool masked_blocks = false;  // every third block-table entry of a context holds an id outside the cache (GPU only)
  std::vector<SeqSpec> seqs;
  float scale = 0.125f;

  std::string Describe() const {
    return "Nq " + std::to_string(num_heads) + " Nkv " + std::to_string(num_kv_heads) + " D " +
           std::to_string(head_dim) + " block " + std::to_string(block_size) + " q " + DTypeName(q_dtype) +
           " cache " + DTypeName(cache_dtype) + " layout " + std::to_string(static_cast<int>(layout)) +
           (strided_q_out ? " strided q/out" : "") + (masked_blocks ? " masked blocks" : "") + " seqs " +
           std::to_string(seqs.size());
  }
};

// The op's inputs on the device, and the values the reference needs on the host.
struct Inputs {
  std::vector<Tensor> buffers;  // what the cache views live in
  Tensor q, k_cache, v_cache, block_tables, seq_lens, query_start_loc;
  int64_t num_tokens = 0, max_query_len = 0, max_seq_len = 0;
  std::vector<int64_t> token_begin, context_begin;  // per sequence: first q row, first row of k_all
  std::vector<double> q_host, k_host, v_host;        // q [T, Nq, D]; k, v [total context, Nkv, D]
  std::vector<bool> key_masked;                      // [total context]: its block id is outside the cache
};

// K and V caches [num_blocks, block_size, Nkv, D] as views of their buffers.
void MakeCaches(const Problem& p, int64_t num_blocks, Device device, Inputs& in) {
  const int64_t bs = p.block_size, nkv = p.num_kv_heads, d = p.head_dim;
  const DType dt = p.cache_dtype;
  switch (p.layout) {
    case Layout::kSeparate: {
      in.buffers = {Tensor::Empty({num_blocks, bs, nkv, d}, dt, device), Tensor::Empty({num_blocks, bs, nkv, d}, dt, device)};
      in.k_cache = in.buffers[0];
      in.v_cache = in.buffers[1];
      break;
    }
    case Layout::kInterleavedKv: {
      in.buffers = {Tensor::Empty({num_blocks, 2, bs, nkv, d}, dt, device)};
      in.k_cache = in.buffers[0].Select(1, 0);
      in.v_cache = in.buffers[0].Select(1, 1);
      break;
    }
    case Layout::kLayerSlice: {
      in.buffers = {Tensor::Empty({3, num_blocks, bs, nkv, d}, dt, device)};
      in.k_cache = in.buffers[0].Select(0, 2);
      in.v_cache = in.buffers[0].Select(0, 0);
      break;
    }
    case Layout::kHeadMajor: {
      in.buffers = {Tensor::Empty({num_blocks, nkv, bs, d + 3}, dt, device),
                    Tensor::Empty({num_blocks, nkv, bs, d + 1}, dt, device)};
      in.k_cache = in.buffers[0].Slice(3, 0, d).Transpose(1, 2);
      in.v_cache = in.buffers[1].Slice(3, 0, d).Transpose(1, 2);
      break;
    }
  }
  for (const Tensor& b : in.buffers) Poison(b);
}

// Shuffled block ids per sequence; spare (never written, NaN) blocks fill the rest
// of each block-table row.
std::vector<int32_t> MakeBlockTable(const Problem& p, int64_t num_blocks, int64_t max_blocks,
                                    const std::vector<int64_t>& blocks_needed, std::mt19937& rng) {
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int64_t num_used = std::accumulate(blocks_needed.begin(), blocks_needed.end(), int64_t{0});
  std::vector<int32_t> table(p.seqs.size() * max_blocks);
  int64_t next = 0;
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    for (int64_t i = 0; i < max_blocks; ++i) {
      table[b * max_blocks + i] = i < blocks_needed[b] ? ids[next++] : ids[num_used + (b + i) % (num_blocks - num_used)];
    }
  }
  return table;
}

Inputs Build(const Problem& p, Device device, std::mt19937& rng) {
  Inputs in;
  std::vector<int64_t> blocks_needed, slots;
  std::vector<int32_t> seq_lens, qsl = {0};
  int64_t total_context = 0;
  for (const SeqSpec& s : p.seqs) {
    const int64_t len = s.cached + s.new_tokens;
    in.token_begin.push_back(in.num_tokens);
    in.context_begin.push_back(total_context);
    in.num_tokens += s.new_tokens;
    total_context += len;
    in.max_query_len = std::max(in.max_query_len, s.new_tokens);
    in.max_seq_len = std::max(in.max_seq_len, len);
    blocks_needed.push_back((len + p.block_size - 1) / p.block_size);
    seq_lens.push_back(static_cast<int32_t>(len));
    qsl.push_back(static_cast<int32_t>(in.num_tokens));
  }
  const int64_t max_blocks = *std::max_element(blocks_needed.begin(), blocks_needed.end()) + 2;
  const int64_t num_blocks = std::accumulate(blocks_needed.begin(), blocks_needed.end(), int64_t{0}) + 3;
  MakeCaches(p, num_blocks, device, in);
  const std::vector<int32_t> table = MakeBlockTable(p, num_blocks, max_blocks, blocks_needed, rng);
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    for (int64_t j = 0; j < seq_lens[b]; ++j) {
      slots.push_back(table[b * max_blocks + j / p.block_size] * p.block_size + j % p.block_size);
    }
  }
  // The whole context goes into the cache in one WriteKvCache call (tested on its own).
  Tensor k_all = RandomTensor({total_context, p.num_kv_heads, p.head_dim}, p.cache_dtype, device, rng);
  Tensor v_all = RandomTensor({total_context, p.num_kv_heads, p.head_dim}, p.cache_dtype, device, rng);
  WriteKvCache({.k = k_all, .v = v_all, .k_cache = in.k_cache, .v_cache = in.v_cache,
                .slot_mapping = Tensor::FromVector(slots, {total_context}).To(device)});
  // Queries of magnitude up to 4 make the softmax peaked, so masking errors show.
  in.q = RandomTensor({in.num_tokens, p.num_heads, p.head_dim}, p.q_dtype, device, rng, -4.0f, 4.0f);
  if (p.strided_q_out) in.q = testing::WithTransposedStorage(testing::WithPaddedRows(in.q, 5), 0, 1);
  // Masked entries alternate -1 and an id past the cache; their keys were written
  // (slots above use the real ids) but a kernel must skip them, not read them.
  std::vector<int32_t> attended = table;
  in.key_masked.assign(total_context, false);
  for (size_t b = 0; p.masked_blocks && b < p.seqs.size(); ++b) {
    for (int64_t i = 1; i < blocks_needed[b]; i += 3) {
      attended[b * max_blocks + i] = i % 2 == 1 ? -1 : static_cast<int32_t>(num_blocks + 7);
      for (int64_t j = i * p.block_size; j < std::min<int64_t>((i + 1) * p.block_size, seq_lens[b]); ++j) {
        in.key_masked[in.context_begin[b] + j] = true;
      }
    }
  }
  in.block_tables = Tensor::FromVector(attended, {static_cast<int64_t>(p.seqs.size()), max_blocks}).To(device);
  in.seq_lens = Tensor::FromVector(seq_lens, {static_cast<int64_t>(seq_lens.size())}).To(device);
  in.query_start_loc = Tensor::FromVector(qsl, {static_cast<int64_t>(qsl.size())}).To(device);
  in.q_host = ToDoubles(in.q);
  in.k_host = ToDoubles(k_all);
  in.v_host = ToDoubles(v_all);
  return in;
}

// out[t, h] = sum_j softmax_j(scale * q[t, h] . k[j, g]) v[j, g] over the unmasked
// j <= position(t) (0 when there are none), g = h / (Nq / Nkv), in double.
std::vector<double> Reference(const Problem& p, const Inputs& in) {
  const int64_t d = p.head_dim, nq = p.num_heads, nkv = p.num_kv_heads, group = nq / nkv;
  std::vector<double> out(in.num_tokens * nq * d);
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    const int64_t len = p.seqs[b].cached + p.seqs[b].new_tokens;
    for (int64_t i = 0; i < p.seqs[b].new_tokens; ++i) {
      const int64_t t = in.token_begin[b] + i, position = len - p.seqs[b].new_tokens + i;
      for (int64_t h = 0; h < nq; ++h) {
        const double* q = &in.q_host[(t * nq + h) * d];
        std::vector<double> s(position + 1);
        double max_s = -INFINITY;
        for (int64_t j = 0; j <= position; ++j) {
          if (in.key_masked[in.context_begin[b] + j]) {
            s[j] = -INFINITY;
            continue;
          }
          const double* k = &in.k_host[((in.context_begin[b] + j) * nkv + h / group) * d];
          for (int64_t e = 0; e < d; ++e) s[j] += q[e] * k[e];
          s[j] *= p.scale;
          max_s = std::max(max_s, s[j]);
        }
        if (max_s == -INFINITY) continue;  // every visible key masked: 0
        double sum = 0;
        for (double& x : s) sum += x = std::exp(x - max_s);
        double* o = &out[(t * nq + h) * d];
        for (int64_t j = 0; j <= position; ++j) {
          const double* v = &in.v_host[((in.context_begin[b] + j) * nkv + h / group) * d];
          for (int64_t e = 0; e < d; ++e) o[e] += s[j] / sum * v[e];
        }
      }
    }
  }
  return out;
}

void RunOnEveryIsa(Device device, const std::function<void()>& body) {
  if (device.type == DeviceType::kCPU) {
    testing::ForEachCpuIsa(body);
  } else {
    body();
  }
}

// Tolerance: f32 outputs 1e-5 (f32 dot products of <= 256 terms and an f32 online
// softmax, errors ~1e-6); bf16 outputs DefaultTolerance (one bf16 rounding).
void CheckProblem(const Problem& p, std::mt19937& rng, const std::vector<Device>& devices = testing::TestDevices()) {
  for (Device device : devices) {
    SCOPED_TRACE(device.ToString() + " " + p.Describe());
    const Inputs in = Build(p, device, rng);
    const std::vector<double> ref = Reference(p, in);
    RunOnEveryIsa(device, [&] {
      Tensor out = Tensor::Empty({in.num_tokens, p.num_heads, p.head_dim}, p.q_dtype, device);
      if (p.strided_q_out) out = testing::WithPaddedRows(out, 3);
      Poison(out);
      PagedAttention({.q = in.q, .k_cache = in.k_cache, .v_cache = in.v_cache, .block_tables = in.block_tables,
                      .seq_lens = in.seq_lens, .query_start_loc = in.query_start_loc, .out = out,
                      .scale = p.scale, .max_query_len = in.max_query_len, .max_seq_len = in.max_seq_len});
      EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(p.q_dtype)));
    });
  }
}

// A batch of `batch` sequences mixing a new prompt, a continuing chunk and decodes
// with random contexts; large batches keep contexts short so the test stays fast.
std::vector<SeqSpec> MixedBatch(int64_t batch, std::mt19937& rng) {
  const int64_t max_context = batch >= 512 ? 24 : batch >= 64 ? 60 : 90;
  std::uniform_int_distribution<int64_t> context(1, max_context);
  std::vector<SeqSpec> seqs;
  if (batch == 1) return {{37, 19}};
  seqs.push_back({0, 23});   // a new prompt
  seqs.push_back({50, 9});   // a continuing chunk
  while (static_cast<int64_t>(seqs.size()) < batch) seqs.push_back({context(rng), 1});  // decodes
  std::shuffle(seqs.begin(), seqs.end(), rng);
  return seqs;
}

TEST(PagedAttentionTest, HeadDimsBatchSizesGqaRatiosAndDtypes) {
  std::mt19937 rng(141);
  for (int64_t head_dim : {64, 128, 256}) {
    for (int64_t batch : {1, 4, 64, 512}) {
      for (int64_t ratio : {1, 2, 8}) {
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          Problem p;
          p.num_kv_heads = 2;
          p.num_heads = 2 * ratio;
          p.head_dim = head_dim;
          p.q_dtype = p.cache_dtype = dtype;
          p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          p.seqs = MixedBatch(batch, rng);
          CheckProblem(p, rng);
        }
      }
    }
  }
}

TEST(PagedAttentionTest, NonContiguousCachesAndStridedQueries) {
  std::mt19937 rng(142);
  for (Layout layout : {Layout::kSeparate, Layout::kInterleavedKv, Layout::kLayerSlice, Layout::kHeadMajor}) {
    for (auto [q_dtype, cache_dtype] : std::vector<std::pair<DType, DType>>{
             {DType::kF32, DType::kF32}, {DType::kBF16, DType::kBF16}, {DType::kF32, DType::kBF16}, {DType::kF16, DType::kF16}}) {
      Problem p;
      p.head_dim = 128;
      p.num_heads = 8;
      p.num_kv_heads = 4;
      p.layout = layout;
      p.q_dtype = q_dtype;
      p.cache_dtype = cache_dtype;
      p.strided_q_out = true;
      p.seqs = {{0, 17}, {33, 1}, {20, 5}, {70, 1}};
      CheckProblem(p, rng);
    }
  }
}

// Odd head dims (AVX-512 masks the tail, in 32-element pairs for bf16 caches; AVX2
// needs multiples of 8 and hands the rest to portable code), odd block sizes, and
// segments cut at block boundaries. f32 queries keep the tolerance tight.
TEST(PagedAttentionTest, OddHeadDimsAndBlockSizes) {
  std::mt19937 rng(143);
  for (int64_t head_dim : {1, 8, 24, 40, 100, 136, 250}) {
    for (int64_t block_size : {1, 5, 16, 64}) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        Problem p;
        p.head_dim = head_dim;
        p.block_size = block_size;
        p.num_heads = 6;
        p.num_kv_heads = 3;
        p.q_dtype = DType::kF32;
        p.cache_dtype = dtype;
        p.scale = 0.3f;
        p.seqs = {{0, 13}, {40, 3}, {17, 1}};
        CheckProblem(p, rng);
      }
    }
  }
}

// One sequence: fewer work items than threads for any pool size, so a long
// context is split into slices whose partial states are merged, and a short one
// has its kv heads split across items.
TEST(PagedAttentionTest, FewWorkItemsSplitContextsOrHeads) {
  std::mt19937 rng(144);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Problem p;
    p.head_dim = 256;
    p.num_heads = 8;
    p.num_kv_heads = 2;
    p.q_dtype = p.cache_dtype = dtype;
    p.scale = 0.0625f;
    p.seqs = {{1200, 1}};
    reach::Reset();
    CheckProblem(p, rng);
    EXPECT_GT(reach::Count("PagedAttentionCpu.split_kv"), 0u);
    p.head_dim = 100;  // merged rows padded (and, for bf16, pair-split) past the head dim
    CheckProblem(p, rng);
    p.head_dim = 256;
    p.seqs = {{700, 7}};
    CheckProblem(p, rng);
    p.num_heads = 16;
    p.num_kv_heads = 8;
    p.head_dim = 128;
    p.seqs = {{40, 1}};
    reach::Reset();
    CheckProblem(p, rng);
    EXPECT_GT(reach::Count("PagedAttentionCpu.split_heads"), 0u);
  }
}

// Forces a GPU PagedAttention variant (vt::tuning family "gpu.paged_attention") for
// its lifetime.
struct ForceVariant {
  explicit ForceVariant(const char* name) { tuning::SetVariant("gpu.paged_attention", name); }
  ~ForceVariant() { tuning::SetVariant("gpu.paged_attention", ""); }
};

// The GPU prefill kernel that stages 16 query rows' keys and values in shared memory
// (kQueryTiles, forced through vt::tuning; the default from 16 query rows): tiles cut at
// 16 rows (1, 15, 16, 17 and 100 new tokens, after prefix contexts), GQA ratios,
// head dims 1 to 256, odd block sizes, f32 and bf16, strided views.
TEST(PagedAttentionTest, GpuQueryTilesMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(146);
  const ForceVariant forced("query_tiles");
  for (int64_t head_dim : {256, 128, 64, 80, 1}) {
    for (int64_t block_size : {16, 5}) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        Problem p;
        p.head_dim = head_dim;
        p.block_size = block_size;
        p.num_heads = 16;
        p.num_kv_heads = 4;
        p.q_dtype = p.cache_dtype = dtype;
        p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        p.seqs = {{0, 17}, {33, 1}, {20, 16}, {0, 100}, {7, 15}};
        reach::Reset();
        CheckProblem(p, rng, gpus);
        EXPECT_GT(reach::Count("PagedAttentionGpu.query_tiles"), 0u);
      }
    }
  }
  Problem p;
  p.num_heads = 8;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.layout = Layout::kHeadMajor;
  p.strided_q_out = true;
  p.q_dtype = DType::kF32;
  p.cache_dtype = DType::kBF16;
  p.seqs = {{64, 33}, {0, 1}};
  CheckProblem(p, rng, gpus);
}

// The tensor-core prefill kernel (kMmaTiles, CUDA: src/vt/gpu/paged_attention_mma.cu)
// forced through vt::tuning: 64-row tiles cut at 1, 63, 64, 65 and 130 new tokens
// after prefix contexts (keys read back through the block table), head dims
// 64/128/256 (256: output dims split over two blocks), GQA 16/4 and 8/8, block sizes
// 16 and 5, bf16 and f16, interleaved and layer-slice caches, strided q/out. Each
// call checks whether the kernel ran: an f32 cache, a head dim it lacks and rows
// not on 16 bytes (the head-major layout) fall back to the other kernels.
TEST(PagedAttentionTest, GpuMmaTilesMatchTheReference) {
  std::vector<Device> gpus;
  for (Device d : testing::GpuTestDevices()) {
    if (d.type == DeviceType::kCUDA) gpus.push_back(d);
  }
  if (gpus.empty()) GTEST_SKIP() << "no CUDA GPU here (the kernel is CUDA-only)";
  std::mt19937 rng(147);
  struct Forced {
    Forced() { tuning::SetVariant("gpu.paged_attention", "mma_tiles"); }
    ~Forced() { tuning::SetVariant("gpu.paged_attention", ""); }
  } forced;
  auto check = [&](const Problem& p, bool mma_runs) {
    reach::Reset();
    CheckProblem(p, rng, gpus);
    EXPECT_EQ(reach::Count("PagedAttentionGpu.mma_tiles") > 0, mma_runs) << p.Describe();
  };
  for (int64_t head_dim : {256, 128, 64}) {
    for (int64_t block_size : {16, 5}) {
      for (DType dtype : {DType::kBF16, DType::kF16}) {
        for (int64_t kv_heads : {4, 16}) {
          Problem p;
          p.head_dim = head_dim;
          p.block_size = block_size;
          p.num_heads = 16;
          p.num_kv_heads = kv_heads;
          p.q_dtype = p.cache_dtype = dtype;
          p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          p.seqs = {{0, 65}, {33, 1}, {100, 64}, {0, 130}, {7, 63}};
          check(p, true);
        }
      }
    }
  }
  for (Layout layout : {Layout::kInterleavedKv, Layout::kHeadMajor, Layout::kLayerSlice}) {
    Problem p;
    p.num_heads = 8;
    p.num_kv_heads = 2;
    p.head_dim = 128;
    p.layout = layout;
    p.strided_q_out = true;
    p.q_dtype = p.cache_dtype = DType::kBF16;
    p.seqs = {{64, 70}, {0, 1}, {5, 200}};
    check(p, layout != Layout::kHeadMajor);  // head-major rows of D + 3 elements: not 16-byte aligned
  }
  Problem f32;
  f32.seqs = {{10, 70}};
  check(f32, false);
  Problem odd_dim;
  odd_dim.head_dim = 80;
  odd_dim.q_dtype = odd_dim.cache_dtype = DType::kBF16;
  odd_dim.seqs = {{0, 70}};
  check(odd_dim, false);
}

// Decodes of every context length in `lens` (one new token each), plus a
// sequence continuing with `q_len` new tokens after 100 cached ones (each of its
// rows has its own causal context).
std::vector<SeqSpec> DecodesAndOneChunk(const std::vector<int64_t>& lens, int64_t q_len) {
  std::vector<SeqSpec> seqs;
  for (int64_t len : lens) seqs.push_back({len - 1, 1});
  if (q_len > 0) seqs.push_back({100, q_len});
  return seqs;
}

// Checks p with the GQA-group kernel forced, and that it ran (or, when the shape
// cannot take it, that the row kernels did).
void CheckGroups(const Problem& p, std::mt19937& rng, const std::vector<Device>& gpus, bool expect_groups = true) {
  reach::Reset();
  CheckProblem(p, rng, gpus);
  const uint64_t rows =
      reach::Count("PagedAttentionGpu.rows_one_pass") + reach::Count("PagedAttentionGpu.rows_split_kv");
  EXPECT_EQ(reach::Count("PagedAttentionGpu.groups_split_kv") > 0, expect_groups) << p.Describe();
  EXPECT_EQ(rows > 0, !expect_groups) << p.Describe();
}

// The GPU decode kernel that reads each K/V row once per GQA group with 16-byte
// loads (kGroupsSplitKv, forced): head dims 64/128/256 (8, 16 and 32 lanes per key,
// f32 256 twice around) and one (50) that must fall back to the row kernels, GQA
// groups 1/2/3/4/8, f32/bf16/f16 caches, contexts across partition boundaries
// (multiples of 64 keys), batches of 1, 3 and 64 (one partition: the direct write;
// several: through CombinePartitions), rows with q_len > 1, masked block ids, odd
// block sizes, strided q/out and cache views (one unaligned, which must fall back).
TEST(PagedAttentionTest, GpuGroupsSplitKvMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(147);
  const ForceVariant forced("groups_split_kv");
  const std::vector<int64_t> lens = {1, 15, 16, 17, 511, 512, 513, 2049};
  for (int64_t head_dim : {64, 128, 256, 50}) {
    for (int64_t ratio : {1, 2, 3, 4, 8}) {
      for (auto [q_dtype, cache_dtype] : std::vector<std::pair<DType, DType>>{{DType::kF32, DType::kF32},
                                                                              {DType::kBF16, DType::kBF16},
                                                                              {DType::kF16, DType::kF16},
                                                                              {DType::kF32, DType::kBF16}}) {
        Problem p;
        p.head_dim = head_dim;
        p.num_kv_heads = 2;
        p.num_heads = 2 * ratio;
        p.q_dtype = q_dtype;
        p.cache_dtype = cache_dtype;
        p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        p.seqs = DecodesAndOneChunk(lens, 5);
        CheckGroups(p, rng, gpus, head_dim != 50);
      }
    }
  }
  // Batches: the 9B decode shape alone, three mixed sequences, 64 short ones (one
  // partition) and 64 decodes of up to 700 keys (partitions again).
  Problem p;
  p.num_heads = 16;
  p.num_kv_heads = 4;
  p.head_dim = 256;
  p.q_dtype = p.cache_dtype = DType::kBF16;
  p.scale = 0.0625f;
  p.seqs = {{2048, 1}};
  CheckGroups(p, rng, gpus);
  p.seqs = {{510, 1}, {15, 1}, {0, 7}};
  CheckGroups(p, rng, gpus);
  p.seqs = MixedBatch(64, rng);
  CheckGroups(p, rng, gpus);
  std::uniform_int_distribution<int64_t> context(1, 700);
  p.seqs.clear();
  for (int i = 0; i < 64; ++i) p.seqs.push_back({context(rng) - 1, 1});
  CheckGroups(p, rng, gpus);
  // Masked block ids (every third block of each context) and odd block sizes.
  for (int64_t block_size : {16, 5, 1}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Problem m;
      m.num_heads = 8;
      m.num_kv_heads = 2;
      m.head_dim = 128;
      m.block_size = block_size;
      m.q_dtype = m.cache_dtype = dtype;
      m.masked_blocks = true;
      m.seqs = DecodesAndOneChunk({1, 17, 40, 513}, 20);
      CheckGroups(m, rng, gpus);
    }
  }
  // Strided q/out and cache views; head-major storage pads rows to D + 3 and D + 1
  // elements, which 16-byte loads cannot take: the row kernels run.
  for (Layout layout : {Layout::kSeparate, Layout::kInterleavedKv, Layout::kLayerSlice, Layout::kHeadMajor}) {
    Problem s;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.head_dim = 128;
    s.layout = layout;
    s.strided_q_out = true;
    s.q_dtype = DType::kF32;
    s.cache_dtype = DType::kBF16;
    s.seqs = DecodesAndOneChunk({1, 129, 300}, 3);
    CheckGroups(s, rng, gpus, layout != Layout::kHeadMajor);
  }
}

// By default, decode batches take the group kernel, prefill (16 or more new rows in
// a sequence) the tensor-core tiles where their operands allow, else the query tiles.
TEST(PagedAttentionTest, GpuDefaultChoiceByQueryLength) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(148);
  Problem p;
  p.num_heads = 16;
  p.num_kv_heads = 4;
  p.head_dim = 256;
  p.q_dtype = p.cache_dtype = DType::kBF16;
  p.seqs = {{300, 1}, {40, 15}};
  reach::Reset();
  CheckProblem(p, rng, gpus);
  EXPECT_GT(reach::Count("PagedAttentionGpu.groups_split_kv"), 0u);
  for (Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    // bf16 q and caches: the tensor-core tiles on CUDA, the query tiles elsewhere;
    // f32 (outside the tensor-core kernel's operands): the query tiles everywhere.
    p.q_dtype = p.cache_dtype = DType::kBF16;
    p.seqs = {{300, 1}, {40, 16}};
    reach::Reset();
    CheckProblem(p, rng, {device});
    const bool cuda = device.type == DeviceType::kCUDA;
    EXPECT_EQ(reach::Count("PagedAttentionGpu.mma_tiles") > 0, cuda);
    EXPECT_EQ(reach::Count("PagedAttentionGpu.query_tiles") > 0, !cuda);
    p.q_dtype = p.cache_dtype = DType::kF32;
    reach::Reset();
    CheckProblem(p, rng, {device});
    EXPECT_EQ(reach::Count("PagedAttentionGpu.mma_tiles"), 0u);
    EXPECT_GT(reach::Count("PagedAttentionGpu.query_tiles"), 0u);
  }
}

TEST(PagedAttentionTest, CpuRunsTheActiveIsaPath) {
  std::mt19937 rng(145);
  Problem p;
  p.seqs = {{5, 3}};
  const Inputs in = Build(p, kCpu, rng);
  testing::ForEachCpuIsa([&] {
    reach::Reset();
    PagedAttention({.q = in.q, .k_cache = in.k_cache, .v_cache = in.v_cache, .block_tables = in.block_tables,
                    .seq_lens = in.seq_lens, .query_start_loc = in.query_start_loc,
                    .out = Tensor::Empty({3, 8, 64}, DType::kF32), .scale = 0.1f, .max_query_len = 3,
                    .max_seq_len = 8});
    EXPECT_EQ(reach::Count(std::string("PagedAttentionCpu.") + cpu::IsaName(cpu::ActiveIsa())), 1u);
  });
}

// Host metadata that would read outside the cache or the query is refused on CPU.
TEST(PagedAttentionTest, CpuRejectsInconsistentMetadata) {
  std::mt19937 rng(146);
  Problem p;
  p.seqs = {{5, 3}, {10, 1}};
  const Inputs in = Build(p, kCpu, rng);
  Tensor out = Tensor::Empty({4, 8, 64}, DType::kF32);
  auto run = [&](const Tensor& tables, const Tensor& lens, const Tensor& qsl, int64_t max_q, int64_t max_len) {
    PagedAttention({.q = in.q, .k_cache = in.k_cache, .v_cache = in.v_cache, .block_tables = tables,
                    .seq_lens = lens, .query_start_loc = qsl, .out = out, .scale = 0.1f, .max_query_len = max_q,
                    .max_seq_len = max_len});
  };
  EXPECT_NO_THROW(run(in.block_tables, in.seq_lens, in.query_start_loc, 3, 11));
  auto expect_error = [&](const char* what, const std::function<void()>& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("PagedAttention"), std::string::npos) << e.what();
    }
  };
  expect_error("seq_len over max_seq_len", [&] { run(in.block_tables, in.seq_lens, in.query_start_loc, 3, 10); });
  expect_error("query longer than max_query_len", [&] { run(in.block_tables, in.seq_lens, in.query_start_loc, 2, 11); });
  expect_error("query longer than its sequence", [&] {
    run(in.block_tables, Tensor::FromVector(std::vector<int32_t>{2, 11}, {2}), in.query_start_loc, 3, 11);
  });
  expect_error("decreasing query_start_loc", [&] {
    run(in.block_tables, in.seq_lens, Tensor::FromVector(std::vector<int32_t>{0, 3, 2}, {3}), 3, 11);
  });
  std::vector<int32_t> bad = {0, 1, 2, 3, 4, 5, 6, 7};
  bad[0] = 1000;
  expect_error("block id outside the cache", [&] {
    run(Tensor::FromVector(bad, {2, 4}), in.seq_lens, in.query_start_loc, 3, 11);
  });
}

}  // namespace
}  // namespace vt

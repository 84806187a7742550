// GPU benchmarks of the ops that dominate a Qwen3.5-9B-shaped step, each put next
// to the device's copy bandwidth measured in the same run.
//
// The ceiling is a device-to-device copy through the runtime (bytes read + bytes
// written per second). Memory-bound ops (decode GEMV, attention over the KV cache,
// the GDN state update, norms) report achieved GB/s and the fraction of that
// ceiling; the prefill GEMM reports TFLOP/s. Times are the median of several timed
// batches of launches, taken on the host after vt::Synchronize (the device's one
// queue is drained, so host time covers exactly the queued work). Working sets
// are larger than the H200's 60 MB L2 or rotate over several copies.
//
// Usage: vt_gpu_bench [device] [--only TEXT]   (default: the first GPU found, cuda:0
// or rocm:0; --only: the rows whose call in Run contains one of the comma-separated
// texts, e.g. "GdnDecode,dequantize", or '|'-separated when a text has commas, e.g.
// "QuantMatMulRow(device, 1, |PagedAttentionRow(device, 1, ")
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vt/ops.h"
#include "vt/quant.h"
#include "vt/tuning.h"

namespace vt {
namespace {

// Median seconds per call of `body` over 5 batches of `calls` calls, after a warm-up.
double SecondsPerCall(Device device, int calls, const std::function<void(int)>& body) {
  for (int i = 0; i < 3; ++i) body(i);
  Synchronize(device);
  std::vector<double> samples;
  for (int batch = 0; batch < 5; ++batch) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body(i);
    Synchronize(device);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    samples.push_back(elapsed.count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

Tensor Random(const Shape& shape, DType dtype, Device device, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = dist(rng);
  Tensor out = Tensor::Empty(shape, dtype, device);
  out.CopyFrom(Tensor::FromVector(values, shape));
  return out;
}

struct Row {
  std::string name;
  double seconds;
  double bytes;
  double flops;
};

void Print(const Row& row, double ceiling_gbs) {
  const double gbs = row.bytes / row.seconds / 1e9;
  std::printf("%-52s %9.1f us %8.0f GB/s %5.2f of copy", row.name.c_str(), row.seconds * 1e6, gbs, gbs / ceiling_gbs);
  if (row.flops > 0) std::printf(" %7.1f TFLOP/s", row.flops / row.seconds / 1e12);
  std::printf("\n");
}

double CopyCeilingGBs(Device device) {
  const size_t bytes = size_t{2} << 30;
  DeviceBackend& backend = GetDeviceBackend(device.type);
  void* a = backend.Allocate(bytes, device.index);
  void* b = backend.Allocate(bytes, device.index);
  backend.CopyDeviceToDevice(a, b, bytes, device.index);  // touch both
  const double seconds =
      SecondsPerCall(device, 10, [&](int) { backend.CopyDeviceToDevice(a, b, bytes, device.index); });
  backend.Free(a, device.index);
  backend.Free(b, device.index);
  return 2.0 * bytes / seconds / 1e9;
}

// x [M, K] bf16 . w [N, K]^T with several weight copies (each 100 MB > L2).
Row MatMulRow(Device device, int64_t m, int64_t n, int64_t k, DType x_dtype, std::mt19937& rng) {
  const int copies = m == 1 ? 4 : 1;
  std::vector<Tensor> weights;
  for (int i = 0; i < copies; ++i) weights.push_back(Random({n, k}, DType::kBF16, device, rng));
  const Tensor x = Random({m, k}, x_dtype, device, rng);
  const Tensor out = Tensor::Empty({m, n}, x_dtype, device);
  const double seconds = SecondsPerCall(device, m == 1 ? 50 : 10, [&](int i) {
    MatMul({.x = x, .w = weights[i % copies], .out = out});
  });
  const double bytes = 2.0 * n * k + (m * k + m * n) * static_cast<double>(Info(x_dtype).block_bytes);
  return {"MatMul M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) + " w bf16 x " +
              DTypeName(x_dtype),
          seconds, bytes, 2.0 * m * n * k};
}

// Block-format weights [N, K] on the device: 64 distinct rows quantized on the host
// (random values in [-1, 1)) and repeated, which keeps large matrices quick to make;
// kernel time does not depend on the values (they are not zero).
Tensor RandomBlockWeights(int64_t n, int64_t k, DType dtype, Device device, std::mt19937& rng) {
  const int64_t row_bytes = BytesFor(dtype, k), distinct = std::min<int64_t>(n, 64);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(k);
  std::vector<char> rows(distinct * row_bytes);
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& v : values) v = dist(rng);
    QuantizeRow(values.data(), k, rows.data() + r * row_bytes, dtype);
  }
  Tensor host = Tensor::Empty({n, k}, dtype);
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(rows.data() + (r % distinct) * row_bytes, row_bytes, static_cast<char*>(host.data()) + r * row_bytes);
  }
  return host.To(device);
}

// x [M, K] bf16 . w [N, K]^T with block-format weights (two copies when under 256 MB,
// so that calls alternate between buffers larger than L2 together), under the default
// choice or a forced gpu.matmul_block `variant` (quant_mma, dequant_blas) or, named
// "<family>:<variant>", another family's ("skinny" for gpu.matmul_skinny: quant_gemv,
// quant_gemv_staged; gpu.quant_gemv_staged: one_block, two_blocks).
Row QuantMatMulRow(Device device, int64_t m, int64_t n, int64_t k, DType w_dtype, std::mt19937& rng,
                   const char* variant = "") {
  const std::string_view forced(variant);
  const size_t colon = forced.find(':');
  const std::string_view given_family = colon == std::string_view::npos ? "gpu.matmul_block" : forced.substr(0, colon);
  const std::string family(given_family == "skinny" ? "gpu.matmul_skinny" : given_family);
  const std::string name(colon == std::string_view::npos ? forced : forced.substr(colon + 1));
  const double w_bytes = static_cast<double>(BytesFor(w_dtype, n * k));
  const int copies = w_bytes < 256e6 ? 2 : 1;
  std::vector<Tensor> weights;
  for (int i = 0; i < copies; ++i) weights.push_back(RandomBlockWeights(n, k, w_dtype, device, rng));
  const Tensor x = Random({m, k}, DType::kBF16, device, rng);
  const Tensor out = Tensor::Empty({m, n}, DType::kBF16, device);
  tuning::SetVariant(family, name);
  const double seconds = SecondsPerCall(device, m <= 16 ? 50 : 10, [&](int i) {
    MatMul({.x = x, .w = weights[i % copies], .out = out});
  });
  tuning::SetVariant(family, "");
  return {"MatMul M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) + " w " +
              DTypeName(w_dtype) + " x bf16" + (name.empty() ? std::string() : " " + name),
          seconds, w_bytes + 2.0 * (m * k + m * n), 2.0 * m * n * k};
}

// MoeExperts of the 35B-A3B shape (256 experts of H 2048, I 512, 8 per token) in
// `w_dtype` for `tokens` tokens routed uniformly at random, under the default choice
// or a forced gpu.moe_experts `variant`. Bytes: the weights of the experts touched.
Row MoeExpertsRow(Device device, int64_t tokens, DType w_dtype, std::mt19937& rng, const char* variant = "") {
  constexpr int64_t kExperts = 256, kHidden = 2048, kInter = 512, kTopK = 8;
  const Tensor gate = RandomBlockWeights(kExperts * kInter, kHidden, w_dtype, device, rng).View({kExperts, kInter, kHidden});
  const Tensor up = RandomBlockWeights(kExperts * kInter, kHidden, w_dtype, device, rng).View({kExperts, kInter, kHidden});
  const Tensor down = RandomBlockWeights(kExperts * kHidden, kInter, w_dtype, device, rng).View({kExperts, kHidden, kInter});
  std::vector<int32_t> ids(tokens * kTopK);
  std::vector<int32_t> order(kExperts);
  std::vector<bool> touched(kExperts, false);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < kExperts; ++e) order[e] = static_cast<int32_t>(e);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t j = 0; j < kTopK; ++j) touched[ids[t * kTopK + j] = order[j]] = true;
  }
  const Tensor topk_ids = Tensor::FromVector(ids, {tokens, kTopK}).To(device);
  const Tensor topk_weights =
      Tensor::FromVector(std::vector<float>(tokens * kTopK, 1.0f / kTopK), {tokens, kTopK}).To(device);
  const Tensor x = Random({tokens, kHidden}, DType::kBF16, device, rng);
  const Tensor out = Tensor::Empty({tokens, kHidden}, DType::kBF16, device);
  tuning::SetVariant("gpu.moe_experts", variant);
  const double seconds = SecondsPerCall(device, 10, [&](int) {
    MoeExperts({.x = x, .w_gate = gate, .w_up = up, .w_down = down, .topk_weights = topk_weights,
                .topk_ids = topk_ids, .out = out});
  });
  tuning::SetVariant("gpu.moe_experts", "");
  const int64_t experts_touched = std::count(touched.begin(), touched.end(), true);
  const double bytes = experts_touched * 3.0 * BytesFor(w_dtype, kInter * kHidden);
  return {"MoeExperts T=" + std::to_string(tokens) + " 35B-A3B w " + DTypeName(w_dtype) +
              (*variant ? std::string(" ") + variant : std::string()),
          seconds, bytes, 2.0 * 3 * tokens * kTopK * kInter * kHidden};
}

// Decode attention: `batch` sequences of `context` tokens, Nq 16, Nkv 4, D 256, bf16,
// under the default kernel choice (the GQA-group kernel for these shapes) or a
// forced `variant` ("rows": the row kernels, for comparison). Bytes count each K/V
// row once: the group kernel reads it once per GQA group of 16 / kv_heads query heads, the row
// kernels once per query head.
Row PagedAttentionRow(Device device, int64_t batch, int64_t context, std::mt19937& rng, const char* variant = "",
                      int64_t kv_heads = 4) {
  const int64_t heads = 16, head_dim = 256, block_size = 16;
  const int64_t blocks_per_seq = (context + block_size - 1) / block_size, blocks = batch * blocks_per_seq;
  const Tensor k_cache = Random({blocks, block_size, kv_heads, head_dim}, DType::kBF16, device, rng);
  const Tensor v_cache = Random({blocks, block_size, kv_heads, head_dim}, DType::kBF16, device, rng);
  std::vector<int32_t> table(blocks), seq_lens(batch, static_cast<int32_t>(context)), qsl(batch + 1);
  for (int64_t i = 0; i < blocks; ++i) table[i] = static_cast<int32_t>(i);
  for (int64_t b = 0; b <= batch; ++b) qsl[b] = static_cast<int32_t>(b);
  const Tensor q = Random({batch, heads, head_dim}, DType::kBF16, device, rng);
  const Tensor out = Tensor::Empty({batch, heads, head_dim}, DType::kBF16, device);
  const PagedAttentionArgs args{.q = q, .k_cache = k_cache, .v_cache = v_cache,
                                .block_tables = Tensor::FromVector(table, {batch, blocks_per_seq}).To(device),
                                .seq_lens = Tensor::FromVector(seq_lens, {batch}).To(device),
                                .query_start_loc = Tensor::FromVector(qsl, {batch + 1}).To(device),
                                .out = out, .scale = 0.0625f, .max_query_len = 1, .max_seq_len = context};
  tuning::SetVariant("gpu.paged_attention", variant);
  const double seconds = SecondsPerCall(device, 20, [&](int) { PagedAttention(args); });
  tuning::SetVariant("gpu.paged_attention", "");
  const double bytes = 2.0 * batch * context * kv_heads * head_dim * 2;
  return {"PagedAttention decode B=" + std::to_string(batch) + " ctx=" + std::to_string(context) + " D=256 Nkv=" +
              std::to_string(kv_heads) + " bf16" +
              (*variant != 0 ? std::string(" ") + variant : std::string()),
          seconds, bytes, 0};
}

// GDN decode: one token per sequence, Hk 16, Hv 32, Dk = Dv = 128, f32 state.
Row GdnRecurrentRow(Device device, int64_t batch, std::mt19937& rng) {
  const int64_t hk = 16, hv = 32, dk = 128, dv = 128;
  GdnArgs a;
  a.q = Random({batch, hk, dk}, DType::kBF16, device, rng);
  a.k = Random({batch, hk, dk}, DType::kBF16, device, rng);
  a.v = Random({batch, hv, dv}, DType::kBF16, device, rng);
  a.g = Tensor::Empty({batch, hv}, DType::kF32, device);
  Fill({.dst = a.g, .value = -0.1});
  a.beta = Tensor::Empty({batch, hv}, DType::kF32, device);
  Fill({.dst = a.beta, .value = 0.5});
  a.states = Tensor::Zeros({batch, hv, dk, dv}, DType::kF32, device);
  std::vector<int32_t> qsl(batch + 1), slots(batch);
  for (int64_t b = 0; b <= batch; ++b) qsl[b] = static_cast<int32_t>(b);
  for (int64_t b = 0; b < batch; ++b) slots[b] = static_cast<int32_t>(b);
  a.query_start_loc = Tensor::FromVector(qsl, {batch + 1}).To(device);
  a.state_slot_ids = Tensor::FromVector(slots, {batch}).To(device);
  a.out = Tensor::Empty({batch, hv, dv}, DType::kBF16, device);
  a.tiled_value_heads = false;
  const double seconds = SecondsPerCall(device, 20, [&](int) { GdnRecurrent(a); });
  return {"GdnRecurrent decode B=" + std::to_string(batch) + " Hv=32 Dk=Dv=128", seconds,
          2.0 * batch * hv * dk * dv * 4, 0};
}

// GdnDecode (a GDN layer's decode step, fused): Hk 16, Hv 32, Dk = Dv = 128 (the
// 9B's heads), bf16 activations, f32 state read and written once (the bytes counted).
Row GdnDecodeRow(Device device, int64_t batch, std::mt19937& rng, const char* variant) {
  const int64_t hk = 16, hv = 32, dk = 128, dv = 128, channels = 2 * hk * dk + hv * dv;
  const Tensor slots = [&] {
    std::vector<int32_t> ids(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) ids[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    return Tensor::FromVector(ids, {batch}).To(device);
  }();
  const Tensor A = Tensor::Empty({hv}, DType::kF32, device), out = Tensor::Empty({batch, hv, dv}, DType::kBF16, device);
  Fill({.dst = A, .value = -1.0});  // decays in (0, 1), as A = -exp(A_log)
  GdnDecodeArgs args{.mixed = Random({batch, channels}, DType::kBF16, device, rng),
                     .conv_weight = Random({channels, 4}, DType::kBF16, device, rng),
                     .conv_states = Tensor::Zeros({batch, channels, 3}, DType::kF32, device),
                     .a = Random({batch, hv}, DType::kBF16, device, rng),
                     .b = Random({batch, hv}, DType::kBF16, device, rng),
                     .A = A,
                     .dt_bias = Random({hv}, DType::kF32, device, rng),
                     .states = Tensor::Zeros({batch, hv, dk, dv}, DType::kF32, device),
                     .state_slot_ids = slots,
                     .z = Random({batch, hv, dv}, DType::kBF16, device, rng),
                     .norm_weight = Random({dv}, DType::kBF16, device, rng),
                     .out = out,
                     .key_heads = hk,
                     .key_dim = dk,
                     .eps = 1e-6f,
                     .tiled_value_heads = true};
  tuning::SetVariant("gpu.gdn_decode", variant);
  const double seconds = SecondsPerCall(device, 20, [&](int) { GdnDecode(args); });
  tuning::SetVariant("gpu.gdn_decode", "");
  return {"GdnDecode B=" + std::to_string(batch) + " Hv=32 Dk=Dv=128 " + variant, seconds,
          2.0 * batch * hv * dk * dv * 4, 0};
}

Row RmsNormRow(Device device, int64_t rows, int64_t dim, std::mt19937& rng) {
  const Tensor x = Random({rows, dim}, DType::kBF16, device, rng);
  const Tensor w = Random({dim}, DType::kBF16, device, rng);
  const Tensor out = Tensor::Empty({rows, dim}, DType::kBF16, device);
  const double seconds = SecondsPerCall(device, 50, [&](int) {
    RmsNorm({.x = x, .weight = w, .out = out, .eps = 1e-6f, .weight_offset = 1.0f});
  });
  return {"RmsNorm [" + std::to_string(rows) + ", " + std::to_string(dim) + "] bf16", seconds, 4.0 * rows * dim, 0};
}

// The sampler's rows of a decode step: vt::Sample (temperature 1, top-p 0.9) and
// vt::TopLogprobs (top 20) over [rows, 248320] f32 logits, each reading the logits
// (Sample's top-p filter reads them several times: its bytes count one pass).
Row SamplerRow(Device device, int64_t rows, bool logprobs, std::mt19937& rng) {
  constexpr int64_t kVocab = 248320;
  const Tensor x = Random({rows, kVocab}, DType::kF32, device, rng);
  const Tensor token = Tensor::Zeros({rows}, DType::kI32).To(device);
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(kVocab) + "] f32";
  if (logprobs) {
    const Tensor ids = Tensor::Empty({rows, 1 + kMaxTopLogprobs}, DType::kI32, device);
    const Tensor values = Tensor::Empty({rows, 1 + kMaxTopLogprobs}, DType::kF32, device);
    const double seconds = SecondsPerCall(device, 50, [&](int) {
      TopLogprobs({.x = x, .token = token, .ids = ids, .values = values});
    });
    return {"TopLogprobs k=20 " + shape, seconds, 4.0 * rows * kVocab, 0};
  }
  std::vector<SampleRow> params(static_cast<size_t>(rows), SampleRow{.temperature = 1.0f, .top_p = 0.9f});
  const Tensor words = Tensor::FromVector(SampleRowWords(params), {rows, kSampleRowWords}).To(device);
  const Tensor out = Tensor::Empty({rows}, DType::kI32, device);
  const double seconds = SecondsPerCall(device, 50, [&](int) { Sample({.x = x, .params = words, .out = out}); });
  return {"Sample T=1 top_p=0.9 " + shape, seconds, 4.0 * rows * kVocab, 0};
}

int Run(int argc, char** argv) {
  LoadBackends();
  Device device{DeviceType::kCUDA, 0};
  std::string only;  // --only A,B: the rows whose call below contains A or B
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      throw Error("unknown flag '" + arg + "' (usage: vt_gpu_bench [device] [--only TEXT,...])");
    } else {
      positional.push_back(arg);
    }
  }
  if (!positional.empty()) {
    device = ParseDevice(positional[0]);
  } else if (!IsDeviceAvailable(device)) {
    device = Device{DeviceType::kROCM, 0};
  }
  if (!IsDeviceAvailable(device)) {
    std::printf("vt_gpu_bench: no GPU device available (%s)\n", device.ToString().c_str());
    return 1;
  }
  const std::string name = GetDeviceBackend(device.type).DeviceName(device.index);
  std::printf("device %s: %s\n", device.ToString().c_str(), name.c_str());
  const double ceiling = CopyCeilingGBs(device);
  std::printf("%-52s %30.0f GB/s (read + write)\n", "device-to-device copy (ceiling)", ceiling);
  std::mt19937 rng(1);
  // A row's call, kept as text for --only to match, and run only when it matches.
#define VT_BENCH_ROW(...) std::pair<std::string, std::function<Row()>>(#__VA_ARGS__, [&] { return __VA_ARGS__; })
  const std::vector<std::pair<std::string, std::function<Row()>>> rows = {
      VT_BENCH_ROW(MatMulRow(device, 1, 12288, 4096, DType::kBF16, rng)),
      VT_BENCH_ROW(MatMulRow(device, 1, 4096, 12288, DType::kBF16, rng)),
      VT_BENCH_ROW(MatMulRow(device, 4, 12288, 4096, DType::kBF16, rng)),
      VT_BENCH_ROW(MatMulRow(device, 512, 12288, 4096, DType::kBF16, rng)),
      VT_BENCH_ROW(MatMulRow(device, 512, 12288, 4096, DType::kF32, rng)),
      // 9B decode projections (gate|up, down, GDN in_proj qkv|z|b|a, LM head), 35B-A3B's
      // GDN in_proj and out_proj, in the formats users run; then batches across the
      // GEMV's row limit and a prefill GEMM on decoded weights.
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 12352, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 248320, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 12352, 2048, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 2048, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_K, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ4_K, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ5_K, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ6_K, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 2, 24576, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 3, 24576, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 4, 24576, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 8, 24576, 4096, DType::kQ8_0, rng)),
      // The staged Q8_0 GEMV against the lanes' GEMV at the decode rows and narrow N
      // (where kQuantGemvStagedMinColumns and its row limit belong).
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ8_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ8_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 248320, 4096, DType::kQ8_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 2048, 4096, DType::kQ8_0, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 1024, 2048, DType::kQ8_0, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 1024, 2048, DType::kQ8_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 2, 24576, 4096, DType::kQ8_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 4, 24576, 4096, DType::kQ8_0, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 8, 24576, 4096, DType::kQ8_0, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 8, 4096, 4096, DType::kQ8_0, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 8, 4096, 4096, DType::kQ8_0, rng)),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ8_0, rng, "gpu.quant_gemv_staged:two_blocks")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ8_0, rng, "gpu.quant_gemv_staged:two_blocks")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 12352, 2048, DType::kQ8_0, rng, "gpu.quant_gemv_staged:two_blocks")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_K, rng, "gpu.quant_gemv_staged:two_blocks")),
      VT_BENCH_ROW(QuantMatMulRow(device, 4, 24576, 4096, DType::kQ8_0, rng, "gpu.quant_gemv_staged:two_blocks")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_K, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_0, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ5_K, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ4_K, rng, "skinny:quant_gemv")),
      VT_BENCH_ROW(QuantMatMulRow(device, 4, 24576, 4096, DType::kQ4_K, rng, "skinny:quant_gemv_staged")),
      VT_BENCH_ROW(QuantMatMulRow(device, 4, 24576, 4096, DType::kQ4_K, rng)),
      // The pipelined int8 tiles at the GEMV's rows (where kQuantGemvMaxRows belongs).
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 4096, 12288, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 1, 24576, 4096, DType::kQ4_K, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 2, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      // The block route above the GEMV: int8 tiles against decoding for cuBLAS
      // (where kQuantMmaMaxRows belongs).
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 24576, 4096, DType::kQ8_0, rng, "dequant_blas")),
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 4096, 12288, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 12352, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 12, 4096, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 24576, 4096, DType::kQ4_K, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 16, 24576, 4096, DType::kQ4_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 17, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 64, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 64, 24576, 4096, DType::kQ8_0, rng, "dequant_blas")),
      VT_BENCH_ROW(QuantMatMulRow(device, 64, 24576, 4096, DType::kQ4_K, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 24576, 4096, DType::kQ8_0, rng, "dequant_blas")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 24576, 4096, DType::kQ8_0, rng, "gpu.dequantize:elements")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 4096, 12288, DType::kQ8_0, rng, "gpu.dequantize:tiles")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 4096, 12288, DType::kQ8_0, rng, "gpu.dequantize:elements")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 24576, 4096, DType::kQ4_K, rng, "gpu.dequantize:tiles")),
      VT_BENCH_ROW(QuantMatMulRow(device, 256, 24576, 4096, DType::kQ4_K, rng, "gpu.dequantize:elements")),
      VT_BENCH_ROW(QuantMatMulRow(device, 512, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 512, 24576, 4096, DType::kQ8_0, rng, "dequant_blas")),
      VT_BENCH_ROW(QuantMatMulRow(device, 2048, 24576, 4096, DType::kQ8_0, rng, "quant_mma")),
      VT_BENCH_ROW(QuantMatMulRow(device, 2048, 24576, 4096, DType::kQ8_0, rng, "dequant_blas")),
      VT_BENCH_ROW(QuantMatMulRow(device, 2048, 24576, 4096, DType::kQ8_0, rng, "gpu.dequantize:elements")),
      VT_BENCH_ROW(MoeExpertsRow(device, 16, DType::kQ8_0, rng)),
      VT_BENCH_ROW(MoeExpertsRow(device, 16, DType::kQ8_0, rng, "per_pair")),
      VT_BENCH_ROW(MoeExpertsRow(device, 64, DType::kQ8_0, rng)),
      VT_BENCH_ROW(MoeExpertsRow(device, 64, DType::kQ8_0, rng, "per_pair")),
      VT_BENCH_ROW(MoeExpertsRow(device, 512, DType::kQ8_0, rng)),
      VT_BENCH_ROW(MoeExpertsRow(device, 512, DType::kQ8_0, rng, "per_pair")),
      VT_BENCH_ROW(MoeExpertsRow(device, 2048, DType::kQ8_0, rng)),
      VT_BENCH_ROW(MoeExpertsRow(device, 2048, DType::kQ4_K, rng)),
      VT_BENCH_ROW(MoeExpertsRow(device, 2048, DType::kQ6_K, rng)),
      VT_BENCH_ROW(PagedAttentionRow(device, 1, 8192, rng)),
      VT_BENCH_ROW(PagedAttentionRow(device, 1, 2048, rng)),
      VT_BENCH_ROW(PagedAttentionRow(device, 1, 512, rng)),
      VT_BENCH_ROW(PagedAttentionRow(device, 1, 512, rng, "", 2)),  // the 35B-A3B shape: groups of 8
      VT_BENCH_ROW(PagedAttentionRow(device, 1, 2048, rng, "", 2)),
      VT_BENCH_ROW(PagedAttentionRow(device, 64, 2048, rng)),
      VT_BENCH_ROW(PagedAttentionRow(device, 64, 2048, rng, "rows")),
      VT_BENCH_ROW(GdnRecurrentRow(device, 1, rng)),
      VT_BENCH_ROW(GdnRecurrentRow(device, 64, rng)),
      VT_BENCH_ROW(GdnDecodeRow(device, 1, rng, "whole_head")),
      VT_BENCH_ROW(GdnDecodeRow(device, 1, rng, "column_slices")),
      VT_BENCH_ROW(GdnDecodeRow(device, 64, rng, "whole_head")),
      VT_BENCH_ROW(GdnDecodeRow(device, 64, rng, "column_slices")),
      VT_BENCH_ROW(GdnDecodeRow(device, 256, rng, "whole_head")),
      VT_BENCH_ROW(GdnDecodeRow(device, 256, rng, "column_slices")),
      VT_BENCH_ROW(RmsNormRow(device, 512, 4096, rng)),
      VT_BENCH_ROW(SamplerRow(device, 1, false, rng)),
      VT_BENCH_ROW(SamplerRow(device, 64, false, rng)),
      VT_BENCH_ROW(SamplerRow(device, 1, true, rng)),
      VT_BENCH_ROW(SamplerRow(device, 64, true, rng)),
  };
#undef VT_BENCH_ROW
  auto selected = [&](const std::string& call) {
    if (only.empty()) return true;
    // '|' separates when present: a call's own text has commas ("QuantMatMulRow(device, 1, ").
    const char separator = only.find('|') != std::string::npos ? '|' : ',';
    for (size_t start = 0; start <= only.size();) {
      const size_t comma = std::min(only.find(separator, start), only.size());
      const std::string part = only.substr(start, comma - start);
      if (!part.empty() && call.find(part) != std::string::npos) return true;
      start = comma + 1;
    }
    return false;
  };
  for (const auto& [call, run] : rows) {
    if (selected(call)) Print(run(), ceiling);
  }
  return 0;
}

}  // namespace
}  // namespace vt

int main(int argc, char** argv) {
  try {
    return vt::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vt_gpu_bench: %s\n", e.what());
    return 1;
  }
}

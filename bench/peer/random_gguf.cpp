// random_gguf: writes a Qwen3.5 dense GGUF (architecture `qwen35`) of seeded random
// weights at the real shapes of Qwen3.5-0.8B (or 2B), for end-to-end benchmarks of
// vllm-cpp against llama.cpp on the same file (compare_with_llama_cpp.sh).
//
//   random_gguf --out /tmp/qwen35_0.8b_q8_0.gguf [--shape 0.8b|2b]
//               [--outtype q8_0|q4_0|q4_k|q5_k|q6_k|f16|bf16|f32] [--seed N] [--tokenizer DIR]
//
// Names, shapes and metadata are those `vllm-cpp convert` writes (ModelWeightSpecs,
// GgufWeightName, WriteGgufModelConfig, AddHfTokenizerToGguf), so both engines load
// the file as they would load a converted checkpoint. Values are given directly in
// the GGUF's stored form and chosen to keep activations in a realistic range:
// matrices and the (tied) embedding N(0, 0.02); zero-centred norms stored as
// 1 + N(0, 0.02) (the converter bakes the +1 in) and the plain GDN norm likewise;
// ssm_a = -A with A ~ U(1, 16) (HF's A_log init range); dt_bias = softplus^-1(dt)
// with dt log-uniform in [1e-3, 1e-1] (Mamba's init); conv1d U(-0.5, 0.5) (PyTorch's
// default for a depthwise kernel of width 4). Each row is generated from its own
// seed and quantized straight into the output, so the file does not depend on the
// thread count and no f32 copy of the 254M-value embedding is ever held.
// The tokenizer is a small byte-level BPE (default: the test server's) padded to the
// 248320-token vocabulary with [PADn] entries; benchmarks feed token ids.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "vllm/config/model_config.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/model_loader/gguf_writer.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/dtype.h"
#include "vt/quant.h"
#include "vt/tensor.h"

namespace {

struct Options {
  std::string out;
  std::string shape;
  std::string outtype;
  uint64_t seed = 0;
  std::string tokenizer;
};

// qwen35.md §1.2: the dense sizes with Hk = Hv = 16 (no value-head reorder needed).
vllm::ModelConfig Qwen35Config(const std::string& shape) {
  vllm::ModelConfig c;
  c.architecture = "qwen35";
  c.family = vllm::ModelFamily::kQwen3_5;
  c.vocab_size = 248320;
  c.num_hidden_layers = 24;
  if (shape == "0.8b") {
    c.hidden_size = 1024;
    c.intermediate_size = 3584;
  } else if (shape == "2b") {
    c.hidden_size = 2048;
    c.intermediate_size = 6144;
  } else {
    throw std::invalid_argument("random_gguf: --shape must be 0.8b or 2b, got '" + shape + "'");
  }
  c.max_position_embeddings = 262144;
  c.rms_norm_eps = 1e-6f;
  c.tie_word_embeddings = true;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 256;
  c.rotary_dim = 64;  // head_dim x partial_rotary_factor 0.25
  c.rope_theta = 1e7f;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back((i + 1) % 4 == 0 ? vllm::LayerType::kFullAttention : vllm::LayerType::kLinearAttention);
  }
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = 16;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
  c.gdn_tiled_value_heads = true;
  return c;
}

struct OutType {
  const char* name;
  vt::DType dtype;
  uint32_t file_type;  // llama.cpp's general.file_type
};
constexpr OutType kOutTypes[] = {
    {"f32", vt::DType::kF32, 0},   {"f16", vt::DType::kF16, 1},   {"bf16", vt::DType::kBF16, 32},
    {"q8_0", vt::DType::kQ8_0, 7}, {"q4_0", vt::DType::kQ4_0, 2}, {"q4_k", vt::DType::kQ4_K, 14},
    {"q5_k", vt::DType::kQ5_K, 16}, {"q6_k", vt::DType::kQ6_K, 18},
};

const OutType& ParseOutType(const std::string& name) {
  for (const OutType& t : kOutTypes) {
    if (name == t.name) return t;
  }
  throw std::invalid_argument("random_gguf: unknown --outtype '" + name + "'");
}

// splitmix64: a seed per row, so rows can be generated on any thread.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t NameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

class RowRandom {
 public:
  explicit RowRandom(uint64_t seed) : state_(seed) {}
  double Uniform() { return static_cast<double>((state_ = Mix(state_)) >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// One row's values in the GGUF's stored form (see the file comment).
void FillRow(vllm::WeightKind kind, RowRandom& rng, float* row, int64_t n) {
  using K = vllm::WeightKind;
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case K::kNorm:
      case K::kGdnNorm:
        row[i] = static_cast<float>(1.0 + 0.02 * rng.Normal());
        break;
      case K::kGdnA:
        row[i] = static_cast<float>(-(1.0 + 15.0 * rng.Uniform()));
        break;
      case K::kGdnDtBias: {
        const double dt = std::exp(std::log(1e-3) + rng.Uniform() * (std::log(1e-1) - std::log(1e-3)));
        row[i] = static_cast<float>(std::log(std::expm1(dt)));
        break;
      }
      case K::kGdnConv:
        row[i] = static_cast<float>(rng.Uniform() - 0.5);
        break;
      default:
        row[i] = static_cast<float>(0.02 * rng.Normal());
    }
  }
}

void EncodeRow(const float* values, int64_t n, vt::DType dtype, uint8_t* dst) {
  if (vt::IsQuantized(dtype)) {
    vt::QuantizeRow(values, n, dst, dtype);
  } else if (dtype == vt::DType::kF32) {
    std::memcpy(dst, values, static_cast<size_t>(n) * sizeof(float));
  } else {
    auto* half = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      half[i] = dtype == vt::DType::kBF16 ? vt::F32ToBf16(values[i]) : vt::F32ToF16(values[i]);
    }
  }
}

vt::Tensor RandomTensor(const vllm::WeightSpec& spec, vt::DType dtype, uint64_t seed) {
  vt::Tensor out = vt::Tensor::Empty(spec.shape, dtype, vt::kCpu);
  const int64_t n = spec.shape.back(), rows = out.numel() / n;
  const size_t row_bytes = static_cast<size_t>(vt::BytesFor(dtype, n));
  auto* dst = static_cast<uint8_t*>(out.data());
  const uint64_t tensor_seed = Mix(seed ^ NameHash(spec.name));
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(rows / 8, 1));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t r = rows * w / workers; r < rows * (w + 1) / workers; ++r) {
        RowRandom rng(Mix(tensor_seed + static_cast<uint64_t>(r)));
        FillRow(spec.kind, rng, row.data(), n);
        EncodeRow(row.data(), n, dtype, dst + r * row_bytes);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return out;
}

// Matrices take the output type (every row here is whole 256-value blocks); norms,
// ssm_a, ssm_dt and conv1d stay F32, as the converter keeps them.
vt::DType StoredDtype(vllm::WeightKind kind, vt::DType target) {
  return kind == vllm::WeightKind::kMatrix || kind == vllm::WeightKind::kEmbedding ? target : vt::DType::kF32;
}

void WriteRandomGguf(const Options& o) {
  const vllm::ModelConfig c = Qwen35Config(o.shape);
  const OutType& type = ParseOutType(o.outtype);
  vllm::GgufWriter writer;
  vllm::GgufMetadata& m = writer.metadata();
  vllm::WriteGgufModelConfig(c, m);
  m.Set("general.name", vllm::GgufValue::String("qwen3.5-" + o.shape + "-random"));
  m.Set("general.file_type", vllm::GgufValue::U32(type.file_type));
  if (vt::IsQuantized(type.dtype)) m.Set("general.quantization_version", vllm::GgufValue::U32(2));
  for (const vllm::WeightSpec& spec : vllm::ModelWeightSpecs(c)) {
    const vt::DType dtype = StoredDtype(spec.kind, type.dtype);
    writer.AddTensor(vllm::GgufWeightName(spec, c.family), dtype, spec.shape,
                     [spec, dtype, seed = o.seed] { return RandomTensor(spec, dtype, seed); });
  }
  if (!vllm::AddHfTokenizerToGguf(o.tokenizer, "qwen35", c.vocab_size, m)) {
    throw std::invalid_argument("random_gguf: no tokenizer.json in --tokenizer " + o.tokenizer);
  }
  writer.Write(o.out);
}

Options ParseArgs(int argc, char** argv) {
  vllm::CliArgs cli("random_gguf");
  cli.AddOption("out", "the GGUF file to write");
  cli.AddOption("shape", "Qwen3.5 shapes: 0.8b or 2b", "0.8b");
  cli.AddOption("outtype", "weight matrices: q8_0, q4_0, q4_k, q5_k, q6_k, f16, bf16 or f32", "q8_0");
  cli.AddOption("seed", "seed of the random weights", "1");
  cli.AddOption("tokenizer", "folder holding tokenizer.json (padded to the vocabulary)", VT_PEER_DEFAULT_TOKENIZER);
  cli.AddFlag("help", "show this help");
  if (!cli.ParseOrShowHelp(std::vector<std::string>(argv + 1, argv + argc))) std::exit(0);
  Options o;
  o.out = cli.GetString("out");
  o.shape = cli.GetString("shape");
  o.outtype = cli.GetString("outtype");
  const int64_t seed = cli.GetInt("seed");
  if (seed < 0) throw vllm::CliError("random_gguf: --seed must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  o.tokenizer = cli.GetString("tokenizer");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = ParseArgs(argc, argv);
    const auto start = std::chrono::steady_clock::now();
    WriteRandomGguf(o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "random_gguf: wrote %s (qwen35 %s, %s) in %.1f s\n", o.out.c_str(), o.shape.c_str(),
                 o.outtype.c_str(), s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (see random_gguf --help)\n", e.what());
    return 1;
  }
}

// random_gguf: writes a Qwen3.5 GGUF of seeded random weights at the real shapes of
// Qwen3.5-0.8B, 2B, 9B (architecture `qwen35`) or 35B-A3B (`qwen35moe`), for
// end-to-end benchmarks of vllm-cpp against llama.cpp on the same file
// (compare_with_llama_cpp.sh and the GPU peer comparison).
//
//   random_gguf --out FILE.gguf [--shape 0.8b|2b|9b|35b-a3b] [--num-layers N]
//               [--outtype q8_0|q4_0|q4_k|q5_k|q6_k|f16|bf16|f32] [--seed N]
//               [--threads N] [--tokenizer DIR] [--mtp] [--dry-run]
//
// --mtp adds a random one-layer MTP module as the converter writes a checkpoint's
// (block L, nextn tensors, nextn_predict_layers 1): random drafts are almost always
// rejected, so a speculative run on such a file measures what verification costs.
//
// Names, shapes, dtypes and metadata are those `vllm-cpp convert` writes
// (ModelWeightSpecs, GgufWeightName, WriteGgufModelConfig, AddHfTokenizerToGguf, and
// the converter's dtype rule: matrices, embeddings and experts take --outtype,
// everything else, the MoE router and shared-expert gate included, stays f32; the
// shared-expert gate is stored squeezed to {H}), so both engines load the file as
// they would load a converted checkpoint. The values are random_weights.h's: std
// ~0.02 matrices, norms and GDN parameters as HF initialises or stores them.
//
// Speed: each tensor's bytes are made directly in the stored form on --threads
// workers while the previous tensor is being written (TensorPipeline), so memory
// stays at two tensors and a large model's write is bound by the disk. The bytes
// depend on --seed only, not on the thread count.
// The tokenizer is a small byte-level BPE (default: the test server's) padded to the
// 248320-token vocabulary with [PADn] entries; benchmarks feed token ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "random_weights.h"
#include "vllm/config/model_config.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/model_loader/gguf_writer.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/dtype.h"
#include "vt/tensor.h"

namespace {

struct Options {
  std::string out;  // empty only with --dry-run
  std::string shape;
  int64_t num_layers = 0;  // 0: the shape's own count
  std::string outtype;
  uint64_t seed = 0;
  int threads = 1;
  std::string tokenizer;
  bool dry_run = false;
  bool mtp = false;
};

// The sizes that differ between the Qwen3.5 models (their HF configs); every model has
// head_dim 256 (rotary 64), Hk = 16 key heads of Dk = Dv = 128, conv kernel 4 and
// full attention in every 4th layer.
struct ModelShape {
  const char* name;
  int64_t hidden_size, num_layers;
  int64_t intermediate_size;  // dense FFN width; 0 for MoE
  int64_t num_heads, num_kv_heads, num_value_heads;
  bool tied;
  int64_t num_experts = 0, experts_per_token = 0, expert_ffn = 0, shared_expert_ffn = 0;  // MoE only
};
constexpr ModelShape kShapes[] = {
    {"0.8b", 1024, 24, 3584, 8, 2, 16, true},
    {"2b", 2048, 24, 6144, 8, 2, 16, true},
    {"9b", 4096, 32, 12288, 16, 4, 32, false},
    {"35b-a3b", 2048, 40, 0, 16, 2, 32, false, 256, 8, 512, 512},
};

const ModelShape& FindShape(const std::string& name) {
  for (const ModelShape& s : kShapes) {
    if (name == s.name) return s;
  }
  throw vllm::CliError("random_gguf: --shape must be 0.8b, 2b, 9b or 35b-a3b, got '" + name + "'");
}

// `num_layers` replaces the shape's layer count (layer i is full attention when
// (i + 1) % 4 == 0, as in every size).
vllm::ModelConfig Qwen35Config(const ModelShape& s, int64_t num_layers) {
  vllm::ModelConfig c;
  const bool moe = s.num_experts > 0;
  c.family = moe ? vllm::ModelFamily::kQwen3_5Moe : vllm::ModelFamily::kQwen3_5;
  c.architecture = vllm::GgufArchitectureName(c.family);
  c.vocab_size = 248320;
  c.hidden_size = s.hidden_size;
  c.num_hidden_layers = num_layers;
  c.intermediate_size = s.intermediate_size;
  c.max_position_embeddings = 262144;
  c.rms_norm_eps = 1e-6f;
  c.tie_word_embeddings = s.tied;
  c.num_attention_heads = s.num_heads;
  c.num_key_value_heads = s.num_kv_heads;
  c.head_dim = 256;
  c.rotary_dim = 64;  // head_dim x partial_rotary_factor 0.25
  c.rope_theta = 1e7f;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  for (int64_t i = 0; i < num_layers; ++i) {
    c.layer_types.push_back((i + 1) % 4 == 0 ? vllm::LayerType::kFullAttention : vllm::LayerType::kLinearAttention);
  }
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = s.num_value_heads;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
  c.gdn_tiled_value_heads = true;  // random weights: the head order is immaterial
  c.num_experts = s.num_experts;
  c.num_experts_per_tok = s.experts_per_token;
  c.moe_intermediate_size = s.expert_ffn;
  c.shared_expert_intermediate_size = s.shared_expert_ffn;
  c.norm_topk_prob = true;
  vllm::ValidateModelConfig(c, std::string("random_gguf --shape ") + s.name);
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
  throw vllm::CliError("random_gguf: unknown --outtype '" + name + "'");
}

// One tensor of the file, in the writer's order.
struct PlannedWeight {
  std::string name;  // GGUF name
  vllm::WeightKind kind;
  vt::DType dtype;
  vt::Shape shape;  // row-major, as stored
};

// The converter's layout (PlanHfToGguf): matrices, embeddings and experts in the
// output type (every row of these shapes is whole 256-value blocks, so no fallback
// type is needed), the rest f32, the shared-expert gate [1, H] squeezed to {H}.
std::vector<PlannedWeight> PlanWeights(const vllm::ModelConfig& c, vt::DType target) {
  std::vector<PlannedWeight> plan;
  std::vector<vllm::WeightSpec> specs = vllm::ModelWeightSpecs(c);
  if (c.mtp_num_hidden_layers > 0) {
    const std::vector<vllm::WeightSpec> mtp = vllm::MtpWeightSpecs(c);
    specs.insert(specs.end(), mtp.begin(), mtp.end());
  }
  for (const vllm::WeightSpec& spec : specs) {
    using K = vllm::WeightKind;
    const bool big = spec.kind == K::kMatrix || spec.kind == K::kEmbedding || spec.kind == K::kExperts;
    const vt::Shape shape = spec.kind == K::kSharedExpertGate ? vt::Shape{c.hidden_size} : spec.shape;
    plan.push_back({vllm::GgufWeightName(spec, c.family), spec.kind, big ? target : vt::DType::kF32, shape});
  }
  return plan;
}

int64_t StoredBytes(const PlannedWeight& w) { return vt::BytesFor(w.dtype, vt::NumElements(w.shape)); }

// Makes the tensors in the writer's order, one ahead: while GgufWriter writes tensor
// i, tensor i + 1 is generated on the worker threads. Two slabs of the largest
// tensor's size take turns (memory: two tensors; pages faulted in once). GgufWriter
// drops tensor i before it asks for tensor i + 1, so the slab that tensor i + 1 fills
// (that of tensor i - 1) is free; Start checks it.
class TensorPipeline {
 public:
  TensorPipeline(std::vector<PlannedWeight> plan, uint64_t seed, int num_threads)
      : plan_(std::move(plan)), seed_(seed), num_threads_(num_threads) {
    int64_t largest = 1;
    for (const PlannedWeight& w : plan_) largest = std::max(largest, StoredBytes(w));
    for (auto& slab : slabs_) slab = std::shared_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(largest)]);
  }

  // Tensor i, a view of its slab; tensors are taken in order, each once.
  vt::Tensor Take(size_t i) {
    if (i != next_) throw std::logic_error("random_gguf: tensor " + std::to_string(i) + " asked out of order");
    if (!in_flight_.valid()) in_flight_ = Start(i);
    in_flight_.get();  // rethrows a generation error
    ++next_;
    if (next_ < plan_.size()) in_flight_ = Start(next_);
    const PlannedWeight& w = plan_[i];
    return vt::Tensor::FromExternal(slabs_[i % 2].get(), w.shape, w.dtype, vt::kCpu, slabs_[i % 2]);
  }

 private:
  std::future<void> Start(size_t i) {
    if (slabs_[i % 2].use_count() != 1) {
      throw std::logic_error("random_gguf: the slab of tensor " + plan_[i].name + " is still in use");
    }
    return std::async(std::launch::async, [this, i] {
      const PlannedWeight& w = plan_[i];
      const int64_t n = w.shape.back();
      vllm::bench::FillRandomTensor(w.kind, w.dtype, vt::NumElements(w.shape) / n, n,
                                    vllm::bench::TensorSeed(seed_, w.name), num_threads_, slabs_[i % 2].get());
    });
  }

  std::vector<PlannedWeight> plan_;
  uint64_t seed_;
  int num_threads_;
  std::shared_ptr<uint8_t[]> slabs_[2];
  size_t next_ = 0;
  std::future<void> in_flight_;  // last member: destroyed (waited for) before the slabs
};

// --dry-run: the tensor list and the data size, nothing written (the metadata and the
// tokenizer were built, so every flag was checked).
void PrintPlan(const Options& o, const vllm::ModelConfig& c, const std::vector<PlannedWeight>& plan) {
  int64_t total = 0;
  std::printf("%-34s %-5s %-22s %14s\n", "tensor", "dtype", "shape (GGUF ne reversed)", "bytes");
  for (const PlannedWeight& w : plan) {
    const int64_t bytes = StoredBytes(w);
    total += (bytes + 31) / 32 * 32;  // GgufWriter's default alignment
    std::printf("%-34s %-5s %-22s %14lld\n", w.name.c_str(), vt::DTypeName(w.dtype), vt::ShapeToString(w.shape).c_str(),
                static_cast<long long>(bytes));
  }
  std::printf("%s: %s %s, %lld layers, %s, seed %llu, %d threads: %zu tensors, %lld bytes (%.2f GB) of tensor data "
              "plus the header (metadata and vocabulary)\n",
              o.out.empty() ? "(no --out)" : o.out.c_str(), c.architecture.c_str(), o.shape.c_str(),
              static_cast<long long>(c.num_hidden_layers), o.outtype.c_str(), static_cast<unsigned long long>(o.seed),
              o.threads, plan.size(), static_cast<long long>(total), static_cast<double>(total) / 1e9);
}

void WriteRandomGguf(const Options& o) {
  const ModelShape& shape = FindShape(o.shape);
  vllm::ModelConfig c = Qwen35Config(shape, o.num_layers > 0 ? o.num_layers : shape.num_layers);
  if (o.mtp) c.mtp_num_hidden_layers = 1;
  const OutType& type = ParseOutType(o.outtype);
  const std::vector<PlannedWeight> plan = PlanWeights(c, type.dtype);
  vllm::GgufWriter writer;
  vllm::GgufMetadata& m = writer.metadata();
  vllm::WriteGgufModelConfig(c, m);
  std::string name = "qwen3.5-" + o.shape + "-random";
  if (o.num_layers > 0) name += "-" + std::to_string(o.num_layers) + "layers";
  m.Set("general.name", vllm::GgufValue::String(name));
  m.Set("general.file_type", vllm::GgufValue::U32(type.file_type));
  if (vt::IsQuantized(type.dtype)) m.Set("general.quantization_version", vllm::GgufValue::U32(2));
  // The converter names the pre-tokenizer qwen35 for both architectures.
  if (!vllm::AddHfTokenizerToGguf(o.tokenizer, "qwen35", c.vocab_size, m)) {
    throw vllm::CliError("random_gguf: no tokenizer.json in --tokenizer " + o.tokenizer);
  }
  if (o.dry_run) return PrintPlan(o, c, plan);  // everything checked but the writing
  auto pipeline = std::make_shared<TensorPipeline>(plan, o.seed, o.threads);
  for (size_t i = 0; i < plan.size(); ++i) {
    writer.AddTensor(plan[i].name, plan[i].dtype, plan[i].shape, [pipeline, i] { return pipeline->Take(i); });
  }
  writer.Write(o.out);
}

int64_t PositiveInt(const vllm::CliArgs& cli, const std::string& flag) {
  const int64_t v = cli.GetInt(flag);
  if (v < 1) throw vllm::CliError("random_gguf: --" + flag + " must be >= 1, got " + std::to_string(v));
  return v;
}

Options ParseArgs(int argc, char** argv) {
  const int all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  vllm::CliArgs cli("random_gguf");
  cli.AddOption("out", "the GGUF file to write (required unless --dry-run)");
  cli.AddOption("shape", "Qwen3.5 shapes: 0.8b, 2b, 9b or 35b-a3b (MoE)", "0.8b");
  cli.AddOption("num-layers", "layers instead of the shape's (every 4th is full attention)");
  cli.AddOption("outtype", "weight matrices: q8_0, q4_0, q4_k, q5_k, q6_k, f16, bf16 or f32", "q8_0");
  cli.AddOption("seed", "seed of the random weights", "1");
  cli.AddOption("threads", "threads generating tensor data (default: all hardware threads, " +
                               std::to_string(all_threads) + " here)");
  cli.AddOption("tokenizer", "folder holding tokenizer.json (padded to the vocabulary)", VT_PEER_DEFAULT_TOKENIZER);
  cli.AddFlag("mtp", "add a random one-layer MTP module (block L, nextn tensors)");
  cli.AddFlag("dry-run", "list the tensors and the data size instead of writing");
  cli.AddFlag("help", "show this help");
  if (!cli.ParseOrShowHelp(std::vector<std::string>(argv + 1, argv + argc))) std::exit(0);
  Options o;
  o.dry_run = cli.GetFlag("dry-run");
  o.mtp = cli.GetFlag("mtp");
  if (cli.WasGiven("out")) o.out = cli.GetString("out");
  else if (!o.dry_run) throw vllm::CliError("random_gguf: --out is required (or --dry-run)");
  o.shape = cli.GetString("shape");
  if (cli.WasGiven("num-layers")) o.num_layers = PositiveInt(cli, "num-layers");
  o.outtype = cli.GetString("outtype");
  const int64_t seed = cli.GetInt("seed");
  if (seed < 0) throw vllm::CliError("random_gguf: --seed must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  o.threads = all_threads;
  if (cli.WasGiven("threads")) {
    const int64_t threads = PositiveInt(cli, "threads");
    if (threads > 4096) throw vllm::CliError("random_gguf: --threads must be <= 4096, got " + std::to_string(threads));
    o.threads = static_cast<int>(threads);
  }
  o.tokenizer = cli.GetString("tokenizer");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = ParseArgs(argc, argv);
    const auto start = std::chrono::steady_clock::now();
    WriteRandomGguf(o);
    if (o.dry_run) return 0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double bytes = static_cast<double>(std::filesystem::file_size(o.out));
    std::fprintf(stderr, "random_gguf: wrote %s (%s, %s): %.2f GB in %.1f s, %.0f MB/s with %d threads\n",
                 o.out.c_str(), o.shape.c_str(), o.outtype.c_str(), bytes / 1e9, s, bytes / 1e6 / s, o.threads);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (see random_gguf --help)\n", e.what());
    return 1;
  }
}

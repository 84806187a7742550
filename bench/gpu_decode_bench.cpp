// Batch-1 decode of a random-weight Qwen3.5 model with 9B shapes (docs/qwen35.md §1.2:
// L 32, H 4096, Nq/Nkv 16/4, D 256, rotary 64, FFN 12288, Hk/Hv 16/32, Dk = Dv = 128,
// conv 4, vocab 248320, untied) in bf16, through the engine's real path:
//
//   Scheduler::schedule -> ModelRunner::Execute (batch metadata uploaded,
//   ModelRegistry::Forward, greedy argmax on the device, token id copied back) ->
//   Scheduler::update_from_output
//
// for one request: a short prompt, then --steps decode steps, each timed on the host
// from its schedule to its sampled token (the token copy waits for the device).
//
// The ceiling is a device-to-device copy measured in the same run (bytes read +
// written per second, as in bench/gpu_notes.md). A decode step must read every
// weight once except the embedding table, of which it reads one row: those weight
// bytes over the copy bandwidth are the step's roofline. Also printed, to say where
// the time goes: the decode GEMVs alone (every weight matrix once, in layer order,
// the same x/out shapes as a step), the vt op dispatches of one decode step (about
// one kernel launch each) and the MatMul kernels they reached, and the host time to
// enqueue one forward against the time until the device has finished it.
//
// Decode steps replay device graphs, as in the engine (decode_graphs.h), on a
// device that has them. Variants (--variants): kernel choices forced through
// vt::tuning for the whole run of each, so every variant is measured in one
// process, on the same weights and against the same ceiling: "default" forces
// nothing, "eager" runs every step op by op, "gemv=V" forces the decode MatMul
// variant V (gpu.matmul_skinny), "gdn=V" the GdnRecurrent variant V
// (gpu.gdn_recurrent), "attn=V" the PagedAttention variant V (gpu.paged_attention),
// "launch=serialized" launches without the overlap of programmatic launch
// (gpu.launch, src/vt/gpu/gpu_launch.cuh), joined by '+'. tests/vt/gpu/matmul_variants_test.cpp and
// gdn_variants_test.cpp check each variant against a reference; the greedy tokens
// of each variant are compared with the first variant's here.
//
// Weights: every matrix is a window, at a random offset, of one 64 MB pool of bf16
// values drawn on the host (uniform, std 0.02, like an LLM initialisation), copied
// on the device, so 18 GB are filled in well under a second; the small f32 vectors
// (norms, A, dt_bias, conv) are drawn on the host in ranges HF's initialisation uses.
//
// Usage: gpu_decode_bench [--device cuda:0] [--shape 9b|small] [--prompt-len 16]
//                         [--steps 64] [--variants default,eager,gdn=token_recurrence,...]
//                         [--mode bench|profile]
// `--device cpu --shape small` runs the same code on a machine without a GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/scheduler.h"
#include "vllm/model_executor/models/model_registry.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/model_runner.h"
#include "vt/gpu/matmul_choice.h"
#include "vt/gpu/paged_attention_choice.h"
#include "vt/ops.h"
#include "vt/device_graph.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vllm::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

struct Options {
  vt::Device device{vt::DeviceType::kCUDA, 0};
  std::string shape = "9b";
  int64_t prompt_len = 16;
  int64_t steps = 64;
  std::string mode = "bench";  // or "profile": one eager prefill and decode step only, for ncu
  std::vector<std::string> variants;  // empty: default (plus the forced variants below on a GPU)
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

// The vt::tuning families a variant may force, by the short names --variants uses.
const std::map<std::string, std::string>& Families() {
  static const std::map<std::string, std::string> families = {
      {"gemv", std::string(vt::gpu::kSkinnyVariantFamily)},
      {"gdn", "gpu.gdn_recurrent"},
      {"attn", std::string(vt::gpu::kPagedAttentionVariantFamily)},
      {"launch", "gpu.launch"}};
  return families;
}

// What a variant changes: kernel choices forced through vt::tuning, and whether
// decode steps run eagerly instead of replaying device graphs.
struct VariantSpec {
  std::vector<std::pair<std::string, std::string>> forced;
  bool eager = false;
};

// "default" (nothing forced), "eager", or "gemv=loads_in_flight+gdn=state_in_registers+eager".
VariantSpec ParseVariant(const std::string& variant) {
  VariantSpec spec;
  if (variant == "default") return spec;
  std::stringstream in(variant);
  for (std::string item; std::getline(in, item, '+');) {
    if (item == "eager") {
      spec.eager = true;
      continue;
    }
    const size_t eq = item.find('=');
    const auto family = Families().find(item.substr(0, eq));
    if (eq == std::string::npos || family == Families().end()) {
      throw std::invalid_argument("variant '" + variant + "': expected default, or eager and FAMILY=VARIANT joined by "
                                  "'+', FAMILY gemv (gpu.matmul_skinny), gdn (gpu.gdn_recurrent), attn "
                                  "(gpu.paged_attention) or launch (gpu.launch)");
    }
    spec.forced.emplace_back(family->second, item.substr(eq + 1));
  }
  return spec;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--device") o.device = vt::ParseDevice(value);
    else if (flag == "--shape") o.shape = value;
    else if (flag == "--prompt-len") o.prompt_len = std::stoll(value);
    else if (flag == "--steps") o.steps = std::stoll(value);
    else if (flag == "--variants") o.variants = SplitCommas(value);
    else if (flag == "--mode" && (value == "bench" || value == "profile")) o.mode = value;
    else throw std::invalid_argument("unknown flag " + flag + " (see the comment at the top of gpu_decode_bench.cpp)");
  }
  if (o.prompt_len < 1 || o.steps < 2) throw std::invalid_argument("--prompt-len must be >= 1 and --steps >= 2");
  for (const std::string& variant : o.variants) ParseVariant(variant);  // bad names fail before any work
  if (o.variants.empty()) {
    o.variants = {"default"};
    if (o.device.type != vt::DeviceType::kCPU) o.variants.insert(o.variants.end(), {"eager", "default"});
  }
  return o;
}

// Qwen3.5 with the 9B's shapes, or a small model of the same structure for checks.
ModelConfig Qwen35Config(const std::string& shape) {
  if (shape != "9b" && shape != "small") throw std::invalid_argument("--shape must be 9b or small, got " + shape);
  const bool nine_b = shape == "9b";
  ModelConfig c;
  c.architecture = "Qwen3_5ForCausalLM";
  c.family = ModelFamily::kQwen3_5;
  c.vocab_size = nine_b ? 248320 : 4096;
  c.hidden_size = nine_b ? 4096 : 256;
  c.num_hidden_layers = nine_b ? 32 : 4;
  c.intermediate_size = nine_b ? 12288 : 768;
  c.max_position_embeddings = 262144;
  c.rms_norm_eps = 1e-6f;
  c.tie_word_embeddings = false;
  c.dtype = vt::DType::kBF16;
  c.num_attention_heads = nine_b ? 16 : 4;
  c.num_key_value_heads = nine_b ? 4 : 1;
  c.head_dim = nine_b ? 256 : 64;
  c.rotary_dim = c.head_dim / 4;
  c.rope_theta = 1e7f;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back((i + 1) % 4 == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  }
  c.linear_num_key_heads = nine_b ? 16 : 2;
  c.linear_num_value_heads = nine_b ? 32 : 4;
  c.linear_key_head_dim = nine_b ? 128 : 32;
  c.linear_value_head_dim = nine_b ? 128 : 32;
  c.linear_conv_kernel_dim = 4;
  return c;
}

// See the top comment: matrices are device copies of pool windows, vectors host draws.
class RandomWeights {
 public:
  RandomWeights(vt::Device device, uint64_t seed) : device_(device), rng_(seed) {
    constexpr int64_t kPoolValues = int64_t{32} << 20;  // 64 MB of bf16
    vt::Tensor host = vt::Tensor::Empty({kPoolValues}, vt::DType::kBF16);
    auto* bits = static_cast<uint16_t*>(host.data());
    const float half_width = 0.02f * std::sqrt(3.0f);  // uniform with std 0.02
    std::uniform_real_distribution<float> dist(-half_width, half_width);
    for (int64_t i = 0; i < kPoolValues; ++i) bits[i] = vt::F32ToBf16(dist(rng_));
    pool_ = device.type == vt::DeviceType::kCPU ? host : host.To(device);
  }

  vt::Tensor Matrix(const vt::Shape& shape) {
    vt::Tensor t = vt::Tensor::Empty(shape, vt::DType::kBF16, device_);
    const vt::Tensor flat = t.View({t.numel()});
    const int64_t pool = pool_.numel();
    for (int64_t done = 0; done < t.numel();) {
      const int64_t count = std::min(pool, t.numel() - done);
      const int64_t start = std::uniform_int_distribution<int64_t>(0, pool - count)(rng_);
      flat.Slice(0, done, done + count).CopyFrom(pool_.Slice(0, start, start + count));
      done += count;
    }
    return t;
  }

  vt::Tensor Vector(const WeightSpec& spec) {
    float lo = -0.1f, hi = 0.1f;  // zero-centred norms: x_hat * (1 + w)
    if (spec.kind == WeightKind::kGdnNorm) lo = 0.9f, hi = 1.1f;         // plain weight
    if (spec.kind == WeightKind::kGdnA) lo = -16.0f, hi = -1.0f;         // -exp(A_log), A_log = log U(1, 16)
    if (spec.kind == WeightKind::kGdnDtBias) lo = 0.5f, hi = 1.5f;
    if (spec.kind == WeightKind::kGdnConv) lo = -0.5f, hi = 0.5f;
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> values(static_cast<size_t>(vt::NumElements(spec.shape)));
    for (float& v : values) v = dist(rng_);
    const vt::Tensor host = vt::Tensor::FromVector(values, spec.shape);
    return device_.type == vt::DeviceType::kCPU ? host : host.To(device_);
  }

 private:
  vt::Device device_;
  std::mt19937_64 rng_;
  vt::Tensor pool_;
};

LoadedModel RandomModel(const ModelConfig& config, vt::Device device) {
  LoadedModel loaded;
  loaded.config = config;
  loaded.path = "random weights (" + std::to_string(config.num_hidden_layers) + " layers, hidden " +
                std::to_string(config.hidden_size) + ")";
  RandomWeights random(device, 1);
  for (const WeightSpec& spec : ModelWeightSpecs(config)) {
    loaded.weights.Add(spec.name, IsExpandedToF32(spec.kind) ? random.Vector(spec) : random.Matrix(spec.shape));
  }
  vt::Synchronize(device);
  return loaded;
}

struct WeightBytes {
  double all = 0;       // every weight
  double per_step = 0;  // what one decode step reads: all but the embedding table (one row of it)
};

WeightBytes CountWeightBytes(const LoadedModel& loaded) {
  WeightBytes bytes;
  for (const auto& [name, t] : loaded.weights.all()) {
    const double b = static_cast<double>(t.nbytes());
    bytes.all += b;
    bytes.per_step += name == "embed_tokens.weight" ? b / static_cast<double>(t.size(0)) : b;
  }
  return bytes;
}

// Device-to-device copy through the backend (2 GiB on a GPU, far past its L2;
// 256 MiB on the CPU), bytes read + written per second.
double CopyBandwidth(vt::Device device) {
  const size_t bytes = device.type == vt::DeviceType::kCPU ? size_t{256} << 20 : size_t{2} << 30;
  vt::DeviceBackend& backend = vt::GetDeviceBackend(device.type);
  void* a = backend.Allocate(bytes, device.index);
  void* b = backend.Allocate(bytes, device.index);
  backend.CopyDeviceToDevice(a, b, bytes, device.index);  // touch both
  std::vector<double> samples;
  for (int batch = 0; batch < 5; ++batch) {
    vt::Synchronize(device);
    const auto start = Clock::now();
    for (int i = 0; i < 5; ++i) backend.CopyDeviceToDevice(a, b, bytes, device.index);
    vt::Synchronize(device);
    samples.push_back(SecondsBetween(start, Clock::now()) / 5);
  }
  backend.Free(a, device.index);
  backend.Free(b, device.index);
  return 2.0 * static_cast<double>(bytes) / Median(samples);
}

struct GemvCall {
  vt::Tensor x, w, out;
};

// A [1, K] input of `dtype` per K, shared by the calls of a pass.
vt::Tensor GemvInput(int64_t k, vt::DType dtype, vt::Device device,
                     std::map<std::pair<int64_t, vt::DType>, vt::Tensor>& inputs) {
  vt::Tensor& x = inputs[{k, dtype}];
  if (!x.defined()) {
    std::mt19937 rng(static_cast<uint32_t>(k));
    std::vector<float> values(static_cast<size_t>(k));
    for (float& v : values) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    x = vt::Tensor::Empty({1, k}, dtype, device);
    x.CopyFrom(vt::Tensor::FromVector(values, {1, k}));
  }
  return x;
}

// Every weight matrix of the checkpoint once (x [1, K] -> out [1, N], in the
// model's weight order, x bf16; out bf16 except for the LM head's f32 logits).
std::vector<GemvCall> SeparateGemvs(const LoadedModel& loaded, vt::Device device) {
  std::vector<GemvCall> calls;
  std::map<std::pair<int64_t, vt::DType>, vt::Tensor> inputs;
  for (const WeightSpec& spec : ModelWeightSpecs(loaded.config)) {
    if (spec.kind != WeightKind::kMatrix) continue;
    const vt::DType out_dtype = spec.name == "lm_head.weight" ? vt::DType::kF32 : vt::DType::kBF16;
    calls.push_back({GemvInput(spec.shape[1], vt::DType::kBF16, device, inputs), loaded.weights.Get(spec.name),
                     vt::Tensor::Empty({1, spec.shape[0]}, out_dtype, device)});
  }
  return calls;
}

// The matrices as the model multiplies them off the CPU (merged_projection.h: GDN
// qkv|z|b|a, attention q|k|v, MLP gate|up merged), the same bytes in 4 MatMuls per
// layer instead of 5 to 8. Weights uninitialised: a GEMV's time does not depend on values.
std::vector<GemvCall> MergedGemvs(const ModelConfig& c, vt::Device device) {
  std::vector<std::pair<int64_t, int64_t>> shapes;  // [N, K]
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[l] == LayerType::kFullAttention) {
      const int64_t q_rows = c.num_attention_heads * c.head_dim * (c.attn_output_gate ? 2 : 1);
      shapes.push_back({q_rows + 2 * c.num_key_value_heads * c.head_dim, H});
      shapes.push_back({H, c.num_attention_heads * c.head_dim});
    } else {
      const int64_t value_dim = c.linear_num_value_heads * c.linear_value_head_dim;
      shapes.push_back({c.linear_conv_dim() + value_dim + 2 * c.linear_num_value_heads, H});
      shapes.push_back({H, value_dim});
    }
    shapes.push_back({2 * I, H});
    shapes.push_back({H, I});
  }
  std::vector<GemvCall> calls;
  std::map<std::pair<int64_t, vt::DType>, vt::Tensor> inputs;
  for (const auto& [n, k] : shapes) {
    calls.push_back({GemvInput(k, vt::DType::kBF16, device, inputs), vt::Tensor::Empty({n, k}, vt::DType::kBF16, device),
                     vt::Tensor::Empty({1, n}, vt::DType::kBF16, device)});
  }
  calls.push_back({GemvInput(H, vt::DType::kBF16, device, inputs),
                   vt::Tensor::Empty({c.vocab_size, H}, vt::DType::kBF16, device),
                   vt::Tensor::Empty({1, c.vocab_size}, vt::DType::kF32, device)});
  return calls;
}

// Median seconds of one pass over `calls`, launched back to back.
double GemvPassSeconds(const std::vector<GemvCall>& calls, vt::Device device) {
  std::vector<double> samples;
  for (int pass = 0; pass < 6; ++pass) {
    vt::Synchronize(device);
    const auto start = Clock::now();
    for (const GemvCall& c : calls) vt::MatMul({.x = c.x, .w = c.w, .out = c.out});
    vt::Synchronize(device);
    if (pass > 0) samples.push_back(SecondsBetween(start, Clock::now()));  // pass 0 warms up
  }
  return Median(samples);
}

struct DecodeRun {
  double prefill_seconds = 0;
  std::vector<double> step_seconds;  // decode steps
  std::vector<int32_t> tokens;       // the greedy ids, the prefill's first
  size_t graph_steps = 0;                          // decode steps that replayed a device graph
  std::map<std::string, uint64_t> dispatches;      // vt ops of one eager decode forward, by op
  std::map<std::string, uint64_t> matmul_kernels;  // MatMulGpu.* reach counts of that forward
  double enqueue_seconds = 0, forward_seconds = 0;  // one forward: host returns, device done
  std::vector<float> decode_logits;  // [vocab] of that forward, to compare the variants' numerics
};

std::unique_ptr<Request> GreedyRequest(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return std::make_unique<Request>("bench", prompt, params, std::vector<int32_t>{}, 0);
}

// One greedy request of `prompt` + `max_tokens` in a scheduler and runner of its
// own (blocks of 16 tokens). With `graphs` (and a device that has them), decode
// steps replay device graphs; state slot 1 is then their padding slot (decode_graphs.h).
struct SingleRequest {
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<ModelRunner> runner;

  SingleRequest(const Model& model, const std::vector<int32_t>& prompt, int64_t max_tokens, bool graphs) {
    const int64_t block_size = 16, total = static_cast<int64_t>(prompt.size()) + max_tokens + 1;
    const int64_t num_blocks = (total + block_size - 1) / block_size + 1;
    scheduler = std::make_unique<Scheduler>(
        SchedulerConfig{.max_num_batched_tokens = std::max<int64_t>(total, 16),
                        .max_num_seqs = 1,
                        .max_model_len = total + 1,
                        .enable_chunked_prefill = true},
        KVCacheConfig{.block_size = static_cast<int32_t>(block_size),
                      .num_blocks = static_cast<int32_t>(num_blocks),
                      .num_state_slots = 1,
                      .enable_prefix_caching = false});
    std::optional<DecodeGraphOptions> options;
    if (graphs && vt::GraphsSupported(model.device())) {
      options = DecodeGraphOptions{.max_batch = 1, .max_model_len = total + 1, .padding_state_slot = 1};
    }
    runner = std::make_unique<ModelRunner>(
        model, AllocateCaches(model.cache_spec(), num_blocks, block_size, 2, model.activation_dtype(), model.device()),
        block_size, 0, options);
    scheduler->add_request(GreedyRequest(prompt, max_tokens));
  }

  // Schedules, runs and samples one step; returns the sampled token.
  int32_t Step() {
    const SchedulerOutput output = scheduler->schedule();
    const RunnerOutput ran = runner->Execute(output);  // the engine's path: greedy argmax on the device
    const int32_t token = ran.sampled.at("bench").token_id;
    scheduler->update_from_output(output, {{"bench", token}});
    return token;
  }
};

void SnapshotDispatches(vt::DeviceType device, DecodeRun& run) {
  for (vt::OpId op : vt::AllOps()) {
    const uint64_t count = vt::Registry::Get().DispatchCount(op, device);
    if (count > 0) run.dispatches[vt::OpName(op)] = count;
  }
  for (const auto& [name, count] : vt::reach::Snapshot()) {
    if (name.rfind("MatMulGpu.", 0) == 0 || name.rfind("MatMulCpu", 0) == 0) run.matmul_kernels[name] = count;
  }
}

// Host time until ModelRegistry::Forward returns (kernels queued) and until the
// device has finished, for the decode step after a prefill, re-run on its batch.
void MeasureEnqueue(const Model& model, const std::vector<int32_t>& prompt, DecodeRun& run) {
  SingleRequest single(model, prompt, 3, false);
  single.Step();  // the prefill
  const SchedulerOutput decode = single.scheduler->schedule();
  ModelRunner& runner = *single.runner;
  const ForwardBatch batch = runner.PrepareBatch(runner.UpdateStates(decode));
  std::vector<double> enqueue, done;
  for (int i = 0; i < 11; ++i) {
    vt::Synchronize(model.device());
    if (i == 10) {
      vt::Registry::Get().ResetDispatchCounts();
      vt::reach::Reset();
    }
    const auto start = Clock::now();
    const vt::Tensor logits = ModelRegistry::Forward(model, batch, runner.caches());
    const auto queued = Clock::now();
    vt::Synchronize(model.device());
    if (i == 10) SnapshotDispatches(model.device().type, run);
    if (i > 0) {
      enqueue.push_back(SecondsBetween(start, queued));
      done.push_back(SecondsBetween(start, Clock::now()));
    }
  }
  run.enqueue_seconds = Median(enqueue);
  run.forward_seconds = Median(done);
  run.decode_logits = ModelRegistry::Forward(model, batch, runner.caches()).To(vt::kCpu).ToFloatVector();
}

// --steps decode steps after the prefill, timed; they replay device graphs (as in
// the engine) unless `eager` or the device has none.
DecodeRun RunDecode(const Model& model, const std::vector<int32_t>& prompt, int64_t steps, bool eager) {
  const vt::Device device = model.device();
  SingleRequest single(model, prompt, steps + 1, !eager);
  DecodeRun run;
  vt::reach::Reset();
  for (int64_t step = 0; single.scheduler->has_unfinished_requests(); ++step) {
    vt::Synchronize(device);
    const auto start = Clock::now();
    const int32_t token = single.Step();
    vt::Synchronize(device);
    const double seconds = SecondsBetween(start, Clock::now());
    if (step == 0) run.prefill_seconds = seconds;
    else run.step_seconds.push_back(seconds);
    run.tokens.push_back(token);
  }
  run.graph_steps = vt::reach::Count("ModelRunner::DecodeGraph");
  MeasureEnqueue(model, prompt, run);
  return run;
}

// --mode profile: the kernels of one eager prefill and one eager decode step and
// nothing after them, so that a profiler's last forward is the decode step
// (tools/gpu/kernel_times.py splits it off at its first GatherRows).
void ProfileOneDecode(const Model& model, const std::vector<int32_t>& prompt) {
  SingleRequest single(model, prompt, 2, false);
  while (single.scheduler->has_unfinished_requests()) single.Step();
  vt::Synchronize(model.device());
  std::printf("profile: one eager prefill of %zu tokens and one eager decode step ran\n", prompt.size());
}

std::string Join(const std::map<std::string, uint64_t>& counts) {
  std::string text;
  for (const auto& [name, count] : counts) text += (text.empty() ? "" : ", ") + name + " " + std::to_string(count);
  return text;
}

struct VariantResult {
  std::string variant;
  DecodeRun run;
  double step_seconds = 0;  // median decode step
  double gemv_seconds = 0;         // every matrix once, merged as the model runs them
  double separate_gemv_seconds = 0;  // every checkpoint matrix once
  size_t same_tokens = 0;   // leading greedy ids equal to the first variant's
};

struct Ceiling {
  WeightBytes weights;
  double matrix_bytes = 0;  // the GEMV pass
  double bandwidth = 0;     // bytes per second
  double roofline_seconds() const { return weights.per_step / bandwidth; }
};

void PrintVariant(const VariantResult& r, const Ceiling& c, int64_t prompt_len) {
  const DecodeRun& run = r.run;
  uint64_t dispatches = 0;
  for (const auto& entry : run.dispatches) dispatches += entry.second;
  std::vector<double> sorted = run.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double gemv_gbs = c.matrix_bytes / r.gemv_seconds / 1e9;
  std::printf("\n[%s]\n", r.variant.c_str());
  std::printf("  prefill of %lld tokens: %.2f ms\n", static_cast<long long>(prompt_len), run.prefill_seconds * 1e3);
  std::printf("  decode step: median %.3f ms, min %.3f, p90 %.3f, max %.3f (%zu steps)\n", r.step_seconds * 1e3,
              sorted.front() * 1e3, sorted[sorted.size() * 9 / 10] * 1e3, sorted.back() * 1e3, sorted.size());
  std::printf("  GEMVs alone (every matrix once, merged as the model runs them): %.3f ms = %.0f GB/s = %.2f of copy\n",
              r.gemv_seconds * 1e3, gemv_gbs, gemv_gbs * 1e9 / c.bandwidth);
  std::printf("  GEMVs alone (every checkpoint matrix separately): %.3f ms = %.2f of copy\n",
              r.separate_gemv_seconds * 1e3, c.matrix_bytes / r.separate_gemv_seconds / c.bandwidth);
  std::printf("  decode steps that replayed a device graph: %zu of %zu\n", run.graph_steps, run.step_seconds.size());
  std::printf("  vt op dispatches in one decode forward: %llu (%s)\n", static_cast<unsigned long long>(dispatches),
              Join(run.dispatches).c_str());
  std::printf("  MatMul kernels in that forward: %s\n", Join(run.matmul_kernels).c_str());
  std::printf("  one forward on a decode batch: host enqueue %.3f ms, device done %.3f ms\n",
              run.enqueue_seconds * 1e3, run.forward_seconds * 1e3);
}

// The first decode forward's logits of every variant against the first variant's:
// greedy ids that part ways are explained by a near-tie when the largest logit
// difference exceeds the first variant's margin between its top two logits.
void PrintLogitsAgreement(const std::vector<VariantResult>& results) {
  if (results.empty() || results.front().run.decode_logits.empty()) return;
  const std::vector<float>& base = results.front().run.decode_logits;
  std::vector<float> sorted = base;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  double sum = 0, squares = 0;
  for (float v : base) sum += v, squares += static_cast<double>(v) * v;
  const double mean = sum / static_cast<double>(base.size());
  const double spread = std::sqrt(std::max(0.0, squares / static_cast<double>(base.size()) - mean * mean));
  std::printf("  first decode logits of '%s': std %.4f, top-1 minus top-2 %.5f\n", results.front().variant.c_str(),
              spread, sorted[0] - sorted[1]);
  for (size_t i = 1; i < results.size(); ++i) {
    const std::vector<float>& other = results[i].run.decode_logits;
    double worst = 0;
    for (size_t v = 0; v < base.size() && v < other.size(); ++v) {
      worst = std::max(worst, std::fabs(static_cast<double>(other[v]) - base[v]));
    }
    std::printf("    '%s': max |logit difference| %.5f (%.4f of the std)\n", results[i].variant.c_str(), worst,
                spread > 0 ? worst / spread : 0.0);
  }
}

void PrintSummary(const std::vector<VariantResult>& results, const Ceiling& c, const Options& o) {
  std::printf("\nsummary: Qwen3.5 %s shapes, bf16, batch 1, %s; copy %.0f GB/s; %.2f GB read per step -> roofline "
              "%.3f ms = %.1f tokens/s\n",
              o.shape.c_str(), o.device.ToString().c_str(), c.bandwidth / 1e9, c.weights.per_step / 1e9,
              c.roofline_seconds() * 1e3, 1.0 / c.roofline_seconds());
  int width = 7;
  for (const VariantResult& r : results) width = std::max(width, static_cast<int>(r.variant.size()));
  std::printf("  %-*s %9s %9s %11s %8s %12s %8s %12s\n", width, "variant", "step ms", "tokens/s", "of roofline",
              "GEMV ms", "GEMV of copy", "rest ms", "same tokens");
  for (const VariantResult& r : results) {
    std::printf("  %-*s %9.3f %9.1f %11.3f %8.3f %12.3f %8.3f %7zu/%-4zu\n", width, r.variant.c_str(),
                r.step_seconds * 1e3, 1.0 / r.step_seconds, c.roofline_seconds() / r.step_seconds,
                r.gemv_seconds * 1e3, c.matrix_bytes / r.gemv_seconds / c.bandwidth,
                (r.step_seconds - r.gemv_seconds) * 1e3, r.same_tokens, r.run.tokens.size());
  }
  std::printf("  (step: schedule to sampled token, median of %lld decode steps; rest = step - GEMVs: the other "
              "kernels, launch gaps, batch upload, argmax and token copy)\n",
              static_cast<long long>(o.steps));
  PrintLogitsAgreement(results);
}

VariantResult RunVariant(const std::string& variant, const Model& model, const LoadedModel& loaded,
                         const std::vector<int32_t>& prompt, const Options& o) {
  const VariantSpec spec = ParseVariant(variant);
  const auto& forced = spec.forced;
  for (const auto& [family, value] : forced) vt::tuning::SetVariant(family, value);
  VariantResult r;
  r.variant = variant;
  r.run = RunDecode(model, prompt, o.steps, spec.eager);
  r.step_seconds = Median(r.run.step_seconds);
  r.separate_gemv_seconds = GemvPassSeconds(SeparateGemvs(loaded, o.device), o.device);
  r.gemv_seconds = o.device.type == vt::DeviceType::kCPU ? r.separate_gemv_seconds
                                                          : GemvPassSeconds(MergedGemvs(loaded.config, o.device), o.device);
  for (const auto& entry : forced) vt::tuning::SetVariant(entry.first, "");
  return r;
}

int Run(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  vt::LoadBackends();
  if (!vt::IsDeviceAvailable(o.device)) throw std::runtime_error("device " + o.device.ToString() + " is not available");
  const std::string name = vt::GetDeviceBackend(o.device.type).DeviceName(o.device.index);
  std::printf("gpu_decode_bench: Qwen3.5 %s shapes, bf16 weights and activations, batch 1, on %s (%s)\n",
              o.shape.c_str(), o.device.ToString().c_str(), name.c_str());
  const auto start = Clock::now();
  const LoadedModel loaded = RandomModel(Qwen35Config(o.shape), o.device);
  const std::unique_ptr<Model> model = ModelRegistry::Create(loaded, {o.device, vt::DType::kBF16});
  Ceiling c;
  c.weights = CountWeightBytes(loaded);
  for (const WeightSpec& spec : ModelWeightSpecs(loaded.config)) {
    if (spec.kind == WeightKind::kMatrix) c.matrix_bytes += static_cast<double>(loaded.weights.Get(spec.name).nbytes());
  }
  std::printf("  random weights on the device in %.1f s: %.2f GB in all; a decode step reads %.2f GB (all but the "
              "embedding table), %.2f GB of them matrices\n",
              SecondsBetween(start, Clock::now()), c.weights.all / 1e9, c.weights.per_step / 1e9,
              c.matrix_bytes / 1e9);
  c.bandwidth = CopyBandwidth(o.device);
  std::printf("  device-to-device copy: %.0f GB/s (read + write); roofline %.3f ms per token = %.1f tokens/s\n",
              c.bandwidth / 1e9, c.roofline_seconds() * 1e3, 1.0 / c.roofline_seconds());
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_len));
  for (int32_t& id : prompt) id = std::uniform_int_distribution<int32_t>(0, 1000)(rng);
  if (o.mode == "profile") {
    ProfileOneDecode(*model, prompt);
    return 0;
  }
  std::vector<VariantResult> results;
  for (const std::string& variant : o.variants) {
    VariantResult r = RunVariant(variant, *model, loaded, prompt, o);
    const std::vector<int32_t>& first = results.empty() ? r.run.tokens : results.front().run.tokens;
    while (r.same_tokens < r.run.tokens.size() && r.same_tokens < first.size() &&
           r.run.tokens[r.same_tokens] == first[r.same_tokens]) {
      ++r.same_tokens;
    }
    PrintVariant(r, c, o.prompt_len);
    results.push_back(std::move(r));
  }
  PrintSummary(results, c, o);
  return 0;
}

}  // namespace
}  // namespace vllm::bench

int main(int argc, char** argv) {
  try {
    return vllm::bench::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_decode_bench: error: %s\n", e.what());
    return 1;
  }
}

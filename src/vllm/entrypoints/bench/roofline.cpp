#include "roofline.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_report.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/ops.h"

namespace vllm::bench {
namespace {

constexpr int64_t kBandwidthBytes = int64_t{1} << 30;

double TensorBytes(const vt::Tensor& t) { return static_cast<double>(vt::BytesFor(t.dtype(), t.numel())); }

// Sums 64-bit words of [begin, end) in four independent chains (so the loads, not
// the adds, limit the loop); the sum is returned so the reads cannot be dropped.
uint64_t SumWords(const uint64_t* begin, const uint64_t* end) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (const uint64_t* p = begin; p + 4 <= end; p += 4) {
    a += p[0];
    b += p[1];
    c += p[2];
    d += p[3];
  }
  return a + b + c + d;
}

double CpuReadSeconds(const std::vector<uint64_t>& words, int threads) {
  std::vector<std::thread> pool;
  std::vector<uint64_t> sums(threads);
  const size_t per = words.size() / threads;
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { sums[t] = SumWords(words.data() + t * per, words.data() + (t + 1) * per); });
  }
  for (auto& th : pool) th.join();
  const double seconds = SecondsBetween(start, Clock::now());
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return seconds;
}

Bandwidth CpuBandwidth() {
  std::vector<uint64_t> words(kBandwidthBytes / 8);
  for (size_t i = 0; i < words.size(); ++i) words[i] = i;  // touch every page before timing
  const int threads = std::max(1, vt::GetNumThreads());
  std::vector<double> seconds;
  CpuReadSeconds(words, threads);  // warm-up
  for (int i = 0; i < 5; ++i) seconds.push_back(CpuReadSeconds(words, threads));
  return {static_cast<double>(kBandwidthBytes) / Summarize(seconds).median, "streaming read"};
}

// Raw device memory, freed by the backend when the holder goes.
struct DeviceBuffer {
  DeviceBuffer(vt::DeviceBackend& backend, vt::Device device, size_t bytes)
      : backend(backend), device(device), data(backend.Allocate(bytes, device.index)) {}
  ~DeviceBuffer() { backend.Free(data, device.index); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  vt::DeviceBackend& backend;
  vt::Device device;
  void* data;
};

Bandwidth DeviceCopyBandwidth(vt::Device device) {
  vt::DeviceBackend& backend = vt::GetDeviceBackend(device.type);
  const auto bytes = static_cast<size_t>(kBandwidthBytes);
  DeviceBuffer src(backend, device, bytes), dst(backend, device, bytes);
  const auto copy_seconds = [&] {
    const Clock::time_point start = Clock::now();
    backend.CopyDeviceToDevice(dst.data, src.data, bytes, device.index);
    backend.Synchronize(device.index);
    return SecondsBetween(start, Clock::now());
  };
  copy_seconds();  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < 10; ++i) seconds.push_back(copy_seconds());
  return {2.0 * static_cast<double>(bytes) / Summarize(seconds).median, "device-to-device copy (read + write)"};
}

// "host CPU (AMD EPYC 9R14 ...)": the model name /proc/cpuinfo gives, when it does.
std::string DeviceName(vt::Device device) {
  std::string name = vt::GetDeviceBackend(device.type).DeviceName(device.index);
  if (device.type != vt::DeviceType::kCPU) return name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return name + " (" + line.substr(line.find_first_not_of(' ', colon + 1)) + ")";
  }
  return name;
}

}  // namespace

int64_t WeightBytes(const LoadedModel& model) {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : model.weights.all()) bytes += vt::BytesFor(tensor.dtype(), tensor.numel());
  return bytes;
}

StepBytes DecodeStepBytes(const LLMEngine& engine, int64_t batch, int64_t context_len) {
  const LoadedModel& model = engine.loaded_model();
  const ModelConfig& c = model.config;
  StepBytes bytes;
  for (const WeightSpec& spec : ModelWeightSpecs(c)) {
    const vt::Tensor& w = model.weights.Get(spec.name);
    double b = TensorBytes(w);
    if (spec.kind == WeightKind::kEmbedding && !c.tie_word_embeddings) {
      b = b / static_cast<double>(w.size(0)) * static_cast<double>(std::min(batch, w.size(0)));
    } else if (spec.kind == WeightKind::kExperts && c.num_experts > 0) {
      const double e = static_cast<double>(c.num_experts), k = static_cast<double>(c.num_experts_per_tok);
      b *= 1.0 - std::pow(1.0 - k / e, static_cast<double>(batch));
    }
    bytes.weights += b;
  }
  const vt::DType cache_dtype = ResolveActivationDtype(engine.config().dtype, c, engine.config().device);
  const double cache_elem = static_cast<double>(vt::BytesFor(cache_dtype, 1));
  const auto seqs = static_cast<double>(batch);
  bytes.kv_cache = seqs * static_cast<double>(c.num_layers_of(LayerType::kFullAttention)) *
                   static_cast<double>(context_len * c.num_key_value_heads * c.head_dim) * 2 * cache_elem;
  const double state_elems = static_cast<double>(c.linear_num_value_heads * c.linear_key_head_dim *
                                                 c.linear_value_head_dim) +
                             static_cast<double>(c.linear_conv_dim() * std::max<int64_t>(c.linear_conv_kernel_dim - 1, 0));
  bytes.state = seqs * static_cast<double>(c.num_layers_of(LayerType::kLinearAttention)) * state_elems * 4 * 2;
  return bytes;
}

Bandwidth MeasureMemoryBandwidth(vt::Device device) {
  return device.type == vt::DeviceType::kCPU ? CpuBandwidth() : DeviceCopyBandwidth(device);
}

nlohmann::json EngineJson(const LLMEngine& engine) {
  const EngineConfig& e = engine.config();
  const ModelConfig& c = engine.model_config();
  const EngineStats stats = engine.stats();
  return {{"model", e.model},
          {"architecture", c.architecture},
          {"device", e.device.ToString()},
          {"device_name", DeviceName(e.device)},
          {"dtype", vt::DTypeName(ResolveActivationDtype(e.dtype, c, e.device))},
          {"weight_format", vt::DTypeName(c.dtype)},
          {"weight_bytes", WeightBytes(engine.loaded_model())},
          {"max_num_seqs", e.max_num_seqs},
          {"max_num_batched_tokens", e.max_num_batched_tokens},
          {"max_model_len", stats.max_model_len},
          {"block_size", e.block_size},
          {"num_kv_blocks", stats.num_kv_blocks},
          {"enforce_eager", e.enforce_eager},
          {"threads", e.device.type == vt::DeviceType::kCPU ? vt::GetNumThreads() : 0},
          {"build", BuildJson()}};
}

}  // namespace vllm::bench

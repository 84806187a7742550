// HF folder -> GGUF conversion (see hf_to_gguf.h for the transforms).
#include "vllm/model_loader/hf_to_gguf.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "loader_util.h"
#include "vllm/model_loader/gdn_value_heads.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"
#include "vt/quant.h"

namespace vllm {
namespace {

struct OutTypeEntry {
  GgufOutType type;
  const char* name;
  vt::DType dtype;
  uint32_t file_type;  // llama.cpp's general.file_type (llama_ftype)
};
constexpr OutTypeEntry kOutTypes[] = {
    {GgufOutType::kF32, "f32", vt::DType::kF32, 0},     {GgufOutType::kF16, "f16", vt::DType::kF16, 1},
    {GgufOutType::kBF16, "bf16", vt::DType::kBF16, 32}, {GgufOutType::kQ8_0, "q8_0", vt::DType::kQ8_0, 7},
    {GgufOutType::kQ4_0, "q4_0", vt::DType::kQ4_0, 2},  {GgufOutType::kQ4_K, "q4_k", vt::DType::kQ4_K, 14},
    {GgufOutType::kQ5_K, "q5_k", vt::DType::kQ5_K, 16}, {GgufOutType::kQ6_K, "q6_k", vt::DType::kQ6_K, 18},
};

const OutTypeEntry& EntryOf(vt::DType dtype) {
  for (const OutTypeEntry& e : kOutTypes) {
    if (e.dtype == dtype) return e;
  }
  throw vt::Error(std::string("convert: no GGUF output type for ") + vt::DTypeName(dtype));
}

vt::DType ResolveOutType(GgufOutType type, vt::DType checkpoint_dtype) {
  if (type != GgufOutType::kAuto) {
    for (const OutTypeEntry& e : kOutTypes) {
      if (e.type == type) return e.dtype;
    }
  }
  return vt::IsFloat(checkpoint_dtype) ? checkpoint_dtype : vt::DType::kF16;
}

// Small and routing tensors stay f32; a quantized type needs whole blocks per row.
vt::DType StoredDtype(WeightKind kind, const vt::Shape& shape, vt::DType target) {
  if (kind != WeightKind::kMatrix && kind != WeightKind::kEmbedding && kind != WeightKind::kExperts) {
    return vt::DType::kF32;
  }
  const int64_t row = shape.back();
  const bool k_quant = target == vt::DType::kQ4_K || target == vt::DType::kQ5_K || target == vt::DType::kQ6_K;
  if (k_quant && row % vt::Info(target).block_elems != 0) target = vt::DType::kQ8_0;
  if (vt::IsQuantized(target) && row % vt::Info(target).block_elems != 0) target = vt::DType::kF16;
  return target;
}

// Rows are independent: quantized on all cores (K-quant scale searches are slow).
vt::Tensor Quantize(const vt::Tensor& f32, vt::DType dtype) {
  vt::Tensor out = vt::Tensor::Empty(f32.shape(), dtype, vt::kCpu);
  const int64_t row = f32.size(-1), rows = f32.numel() / std::max<int64_t>(row, 1);
  const size_t row_bytes = static_cast<size_t>(vt::BytesFor(dtype, row));
  const float* src = f32.data_ptr<float>();
  auto* dst = static_cast<uint8_t*>(out.data());
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(rows / 8, 1));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([=] {
      for (int64_t r = rows * w / workers; r < rows * (w + 1) / workers; ++r) {
        vt::QuantizeRow(src + r * row, row, dst + r * row_bytes, dtype);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return out;
}

// The canonical weight as stored in the GGUF: +1 for zero-centred norms, reshaped to
// the GGUF shape, cast or quantized to `dtype`.
vt::Tensor Encode(const vt::Tensor& weight, vt::DType dtype, const vt::Shape& shape, bool add_one) {
  if (!add_one && weight.dtype() == dtype) return weight.Contiguous().View(shape);
  vt::Tensor f = detail::ToF32(weight, add_one).View(shape);
  if (add_one) {
    float* p = f.data_ptr<float>();
    for (int64_t i = 0; i < f.numel(); ++i) p[i] += 1.0f;
  }
  if (vt::IsQuantized(dtype)) return Quantize(f, dtype);
  if (dtype == vt::DType::kF32) return f;
  vt::Tensor out = vt::Tensor::Empty(shape, dtype, vt::kCpu);
  out.CopyFrom(f);
  return out;
}

void AddGeneralKeys(const std::string& folder, vt::DType target, GgufMetadata& m) {
  std::string name = std::filesystem::path(folder).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(folder).lexically_normal().parent_path().filename().string();
  m.Set("general.name", GgufValue::String(name));
  m.Set("general.file_type", GgufValue::U32(EntryOf(target).file_type));
  if (vt::IsQuantized(target)) m.Set("general.quantization_version", GgufValue::U32(2));
}

}  // namespace

GgufOutType ParseGgufOutType(const std::string& text) {
  if (text == "auto") return GgufOutType::kAuto;
  for (const OutTypeEntry& e : kOutTypes) {
    if (text == e.name) return e.type;
  }
  throw vt::Error("unknown output type '" + text + "' (expected auto, f32, f16, bf16, q8_0, q4_0, q4_k, q5_k or q6_k)");
}

const char* GgufOutTypeName(GgufOutType type) {
  for (const OutTypeEntry& e : kOutTypes) {
    if (e.type == type) return e.name;
  }
  return "auto";
}

GgufWriter PlanHfToGguf(const std::string& hf_folder, const ConvertOptions& options) {
  // The MTP module goes along when the config declares one and the files hold it
  // (checkpoints re-saved by transformers drop mtp.*: those convert without it).
  const bool mtp = options.copy_mtp && LoadHfConfig(hf_folder).mtp_num_hidden_layers > 0 &&
                   SafetensorsCheckpoint::Open(hf_folder).Has("mtp.fc.weight");
  auto model = std::make_shared<LoadedModel>(LoadHfFolder(hf_folder, {.load_mtp = mtp}));
  ModelConfig c = model->config;
  if (!mtp) c.mtp_num_hidden_layers = 0;  // block_count and nextn_predict_layers say what the file holds
  ReorderGdnValueHeads(model->weights, c, ValueHeadOrder::kGrouped, ValueHeadOrder::kTiled);
  const vt::DType target = ResolveOutType(options.outtype, c.dtype);
  GgufWriter writer;
  GgufMetadata& m = writer.metadata();
  m.Set("general.architecture", GgufValue::String(GgufArchitectureName(c.family)));
  AddGeneralKeys(hf_folder, target, m);
  WriteGgufModelConfig(c, m);
  std::vector<WeightSpec> specs = ModelWeightSpecs(c);
  if (mtp) {
    const std::vector<WeightSpec> mtp_specs = MtpWeightSpecs(c);
    specs.insert(specs.end(), mtp_specs.begin(), mtp_specs.end());
  }
  for (const WeightSpec& spec : specs) {
    const vt::Shape shape = spec.kind == WeightKind::kSharedExpertGate ? vt::Shape{c.hidden_size} : spec.shape;
    const vt::DType dtype = StoredDtype(spec.kind, shape, target);
    const bool add_one = spec.kind == WeightKind::kNorm && c.zero_centered_norms;
    writer.AddTensor(GgufWeightName(spec, c.family), dtype, shape, [model, name = spec.name, dtype, shape, add_one] {
      return Encode(model->weights.Get(name), dtype, shape, add_one);
    });
  }
  if (options.copy_tokenizer) {
    AddHfTokenizerToGguf(hf_folder, c.family == ModelFamily::kQwen3 ? "qwen2" : "qwen35", c.vocab_size, m);
  }
  return writer;
}

void ConvertHfToGguf(const std::string& hf_folder, const std::string& out_path, const ConvertOptions& options) {
  PlanHfToGguf(hf_folder, options).Write(out_path);
}

}  // namespace vllm

// LoadModel dispatch, the weight store, and helpers shared by both loaders.
#include "vllm/model_loader/model_loader.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "loader_util.h"
#include "vllm/model_loader/embedded_files.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vt/error.h"

namespace vllm {

const char* CheckpointFormatName(CheckpointFormat format) {
  return format == CheckpointFormat::kGguf ? "gguf" : "hf";
}

GdnValueHeadOrder ParseGdnValueHeadOrder(const std::string& text) {
  if (text == "auto") return GdnValueHeadOrder::kAuto;
  if (text == "tiled") return GdnValueHeadOrder::kTiled;
  if (text == "grouped") return GdnValueHeadOrder::kGrouped;
  throw vt::Error("unknown GDN value-head order '" + text + "' (expected auto, tiled or grouped)");
}

void WeightStore::Add(const std::string& name, vt::Tensor tensor) {
  if (!tensors_.emplace(name, std::move(tensor)).second) throw vt::Error("weight '" + name + "' added twice");
}

void WeightStore::Replace(const std::string& name, vt::Tensor tensor) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw vt::Error("cannot replace weight '" + name + "': the model has no such weight");
  it->second = std::move(tensor);
}

const vt::Tensor& WeightStore::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  std::string some;
  int shown = 0;
  for (auto i = tensors_.begin(); i != tensors_.end() && shown < 4; ++i, ++shown) some += " '" + i->first + "'";
  throw vt::Error("no weight named '" + name + "' (the model has " + std::to_string(tensors_.size()) +
                  " weights, e.g." + some + ")");
}

namespace {

bool HasGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

void CheckIsModelPath(const std::string& path) {
  namespace fs = std::filesystem;
  if (IsEmbeddedFile(path)) return;  // the embedded demo model: a GGUF
  if (!fs::exists(path)) throw vt::Error(path + ": no such file or folder");
  if (!fs::is_directory(path) && !HasGgufMagic(path)) {
    throw vt::Error(path + ": not a GGUF file (no \"GGUF\" magic) and not an HF checkpoint folder");
  }
}

}  // namespace

LoadedModel LoadModel(const std::string& path, const LoadOptions& options) {
  CheckIsModelPath(path);
  return !IsEmbeddedFile(path) && std::filesystem::is_directory(path) ? LoadHfFolder(path, options)
                                                                      : LoadGgufFile(path, options);
}

ModelConfig LoadModelConfig(const std::string& path, const LoadOptions& options) {
  CheckIsModelPath(path);
  if (!IsEmbeddedFile(path) && std::filesystem::is_directory(path)) return LoadHfConfig(path);
  ModelConfig config = ModelConfigFromGguf(GgufFile::Open(path), options.on_warning);
  if (options.gdn_value_head_order == GdnValueHeadOrder::kGrouped) config.gdn_tiled_value_heads = false;
  return config;
}

namespace detail {

std::vector<WeightSpec> WeightSpecsToLoad(const ModelConfig& config, const LoadOptions& options,
                                          const std::string& source) {
  std::vector<WeightSpec> specs = ModelWeightSpecs(config);
  if (!options.load_mtp) return specs;
  if (config.mtp_num_hidden_layers == 0) {
    throw vt::Error(source + ": the MTP module was asked for, but the model has none (mtp_num_hidden_layers / "
                    "nextn_predict_layers is 0 or absent)");
  }
  std::vector<WeightSpec> mtp = MtpWeightSpecs(config);
  specs.insert(specs.end(), mtp.begin(), mtp.end());
  return specs;
}

vt::Tensor ToF32(const vt::Tensor& t, bool always_copy) {
  if (!always_copy && t.dtype() == vt::DType::kF32 && t.is_contiguous()) return t;
  vt::Tensor out = vt::Tensor::Empty(t.shape(), vt::DType::kF32, vt::kCpu);
  out.CopyFrom(t);
  return out;
}

void CheckWeightShape(const std::string& file, const std::string& source_name, const WeightSpec& spec,
                      const vt::Shape& found, const std::string& expected_note) {
  if (found == spec.shape) return;
  throw vt::Error(file + ": tensor '" + source_name + "' (canonical '" + spec.name + "') has shape " +
                  vt::ShapeToString(found) + ", expected " + vt::ShapeToString(spec.shape) +
                  (expected_note.empty() ? " from the config" : " " + expected_note));
}

vt::DType MajorityWeightDtype(const WeightStore& weights, const std::vector<WeightSpec>& specs) {
  std::map<vt::DType, int64_t> elements;
  for (const WeightSpec& spec : specs) {
    if (spec.kind == WeightKind::kMatrix || spec.kind == WeightKind::kEmbedding || spec.kind == WeightKind::kExperts) {
      const vt::Tensor& t = weights.Get(spec.name);
      elements[t.dtype()] += t.numel();
    }
  }
  vt::DType best = vt::DType::kF32;
  int64_t most = -1;
  for (const auto& [dtype, n] : elements) {
    if (n > most) best = dtype, most = n;
  }
  return best;
}

void EmitWarning(LoadedModel& model, const WarningSink& sink, const std::string& message) {
  model.warnings.push_back(message);
  if (sink) sink(message);
  else std::fprintf(stderr, "vllm-cpp: warning: %s\n", message.c_str());
}

}  // namespace detail
}  // namespace vllm

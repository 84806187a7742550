// Loading a model: an HF checkpoint folder or a GGUF file -> ModelConfig + weights.
//
//   vllm::LoadedModel m = vllm::LoadModel("/models/Qwen3.5-0.8B");   // or "model-Q8_0.gguf"
//   const vt::Tensor& wq = m.weights.Get("layers.3.self_attn.q_proj.weight");
//
// Weights have the canonical names and shapes of weight_names.h whatever the
// source, and are CPU tensors pointing into the mmapped files (no copies) except:
//   - small tensors (norms, A, dt_bias, conv1d, the MoE router and shared-expert
//     gate) are expanded to f32 when stored in another dtype, and zero-centred norms read from a qwen35/qwen35moe GGUF get
//     the converter's baked +1 subtracted (in f32), so norms are in HF's convention;
//   - HF's A_log becomes A = -exp(A_log) in f32 (as HF's forward computes it);
//   - per-expert HF tensors are stacked into [E, out, in].
// GGUF block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) stay in their block format for
// vt::MatMul / vt::MoeExperts / vt::GatherRows. MoE gate/up views of a fused
// gate_up tensor have a free expert stride, as vt::MoeExpertsArgs allows.
//
// GDN value heads: GGUF files from llama.cpp's converter (and ours) store them in
// the tiled order; the loader keeps that order and sets
// config.gdn_tiled_value_heads (LoadOptions can override it for older "grouped"
// files). ConvertGdnToGroupedOrder (gdn_value_heads.h) rewrites them for tests.
//
// Errors (vt::Error) name the file, the canonical weight and the source tensor name
// looked for: a missing or mis-shaped weight, an unknown tensor. HF's model.visual.*
// tensors are skipped, and so are HF's mtp.* and a GGUF's MTP block (blk.L and
// beyond) unless LoadOptions::load_mtp asks for them (weight_names.h MtpWeightSpecs).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vllm/config/model_config.h"
#include "vllm/model_loader/gguf_metadata.h"
#include "vllm/model_loader/mapped_file.h"
#include "vt/tensor.h"

namespace vllm {

enum class CheckpointFormat { kHfFolder, kGguf };
const char* CheckpointFormatName(CheckpointFormat format);  // "hf", "gguf"

enum class GdnValueHeadOrder {
  kAuto,     // GGUF: tiled (what current converters write); HF: grouped
  kTiled,    // GGUF only
  kGrouped,  // a GGUF converted before llama.cpp's value-head reorder existed
};
GdnValueHeadOrder ParseGdnValueHeadOrder(const std::string& text);  // "auto", "tiled", "grouped"

struct LoadOptions {
  GdnValueHeadOrder gdn_value_head_order = GdnValueHeadOrder::kAuto;
  // Also load the MTP module (speculative decoding): every weight of MtpWeightSpecs
  // must then be there; a model without one (mtp_num_hidden_layers 0) is an error.
  bool load_mtp = false;
  // Where a GGUF's bytes live (mapped_file.h): the CPU engine asks for a huge-page
  // copy when the file fits comfortably in memory (LLMEngine).
  FileResidency weight_residency = FileResidency::kMapped;
  WarningSink on_warning;  // empty: warnings go to stderr
};

// Canonical name -> tensor.
class WeightStore {
 public:
  void Add(const std::string& name, vt::Tensor tensor);      // throws if the name exists
  void Replace(const std::string& name, vt::Tensor tensor);  // throws if it does not
  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  // Throws vt::Error "no weight named 'x'" listing a few names that exist.
  const vt::Tensor& Get(const std::string& name) const;
  const std::map<std::string, vt::Tensor>& all() const { return tensors_; }
  size_t size() const { return tensors_.size(); }

 private:
  std::map<std::string, vt::Tensor> tensors_;
};

struct LoadedModel {
  ModelConfig config;
  WeightStore weights;
  CheckpointFormat format = CheckpointFormat::kHfFolder;
  std::string path;
  // A GGUF's metadata, tokenizer.ggml.* and tokenizer.chat_template included (null
  // for HF folders, whose tokenizer lives in tokenizer.json next to config.json).
  std::shared_ptr<const GgufMetadata> gguf_metadata;
  std::vector<std::string> warnings;  // also sent to LoadOptions::on_warning
};

// A directory is an HF checkpoint folder; a file must be GGUF.
LoadedModel LoadModel(const std::string& path, const LoadOptions& options = {});
LoadedModel LoadHfFolder(const std::string& folder, const LoadOptions& options = {});
LoadedModel LoadGgufFile(const std::string& path, const LoadOptions& options = {});

// The config alone (reads config.json, or a GGUF's header and tensor list).
ModelConfig LoadModelConfig(const std::string& path, const LoadOptions& options = {});

}  // namespace vllm

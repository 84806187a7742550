// Helpers shared by the HF and GGUF loaders (internal).
#pragma once

#include <string>
#include <vector>

#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"

namespace vllm::detail {

// A contiguous f32 copy of `t` (any float or block dtype); `t` itself when it
// already is contiguous f32 and `always_copy` is false.
vt::Tensor ToF32(const vt::Tensor& t, bool always_copy);

// "FILE: tensor 'SOURCE' (canonical 'NAME') has shape [..], expected [..] from the config"
void CheckWeightShape(const std::string& file, const std::string& source_name, const WeightSpec& spec,
                      const vt::Shape& found, const std::string& expected_note = "");

// The dtype most elements of the projection / embedding / expert weights are stored in.
vt::DType MajorityWeightDtype(const WeightStore& weights, const std::vector<WeightSpec>& specs);

// The weights to load: the model's, plus the MTP module's when options.load_mtp (a
// config without one is an error naming `source` and the config key).
std::vector<WeightSpec> WeightSpecsToLoad(const ModelConfig& config, const LoadOptions& options,
                                          const std::string& source);

// Records a warning in the model and sends it to the sink (stderr when empty).
void EmitWarning(LoadedModel& model, const WarningSink& sink, const std::string& message);

}  // namespace vllm::detail

// vLLM's --generation-config: the sampling defaults a model's creator recommends in
// generation_config.json, applied to every request that does not set the field.
//
//   auto    FOLDER/generation_config.json of an HF model folder when it exists (a .gguf
//           file has none)
//   vllm    no file: the engine's own defaults (SamplingParams)
//   FOLDER  FOLDER/generation_config.json, which must exist
//
// Read from the file (vLLM's ModelConfig.get_diff_sampling_param): temperature, top_p,
// top_k, min_p, repetition_penalty, and max_new_tokens as the default max_tokens. A
// request's own value always wins. Other generation fields are named in
// SamplingDefaults::ignored_fields, so that a caller can warn about them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/sample/sampling_params.h"

namespace vllm {

struct SamplingDefaults {
  std::string source;  // the file read; empty: none
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_tokens;  // the file's max_new_tokens
  // Fields of the file that shape generation but that vllm-cpp does not apply
  // (do_sample false, typical_p, num_beams, max_length, ...), sorted.
  std::vector<std::string> ignored_fields;

  bool empty() const;
  // `params` with the fields set here (all but max_tokens, which the caller caps by
  // what fits the context) replacing its own.
  SamplingParams ApplyTo(SamplingParams params) const;
  // The fields set, with vLLM's names: {"temperature": 0.6, "max_tokens": 128}.
  nlohmann::json ToJson() const;
};

// Loads the defaults for `generation_config` ("auto", "vllm" or a folder) of `model`
// (an HF folder or a .gguf file). Throws std::invalid_argument naming the file and
// the field when the file cannot be read, is not JSON, or holds a bad value.
SamplingDefaults LoadSamplingDefaults(const std::string& generation_config, const std::string& model);
// The same from a parsed file; `source` names it in errors. `is_model_file`: the file
// is the model folder's own, whose bos/eos token ids the model config reads (elsewhere
// they are ignored fields).
SamplingDefaults SamplingDefaultsFromJson(const nlohmann::json& file, const std::string& source,
                                          bool is_model_file = false);

// What a server or command logs at startup, vLLM's wording: the overridden defaults
// (empty when there are none) and the ignored fields (empty when there are none).
std::string SamplingDefaultsLogLine(const SamplingDefaults& defaults);
std::string IgnoredFieldsLogLine(const SamplingDefaults& defaults);

}  // namespace vllm

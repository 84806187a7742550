#include "vllm/entrypoints/generation_config.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "vllm/entrypoints/sampling_params_json.h"

namespace vllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The file's fields that are sampling defaults (vLLM's available_params).
constexpr const char* kAppliedFields[] = {"temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                                          "max_new_tokens"};
// Fields that are no generation behaviour: HF's bookkeeping and its output switches.
constexpr const char* kMetadataFields[] = {"_from_model_config", "transformers_version", "output_attentions",
                                           "output_hidden_states", "output_scores", "output_logits",
                                           "return_dict_in_generate", "use_cache", "pad_token_id"};
// Read by the model config (stop and start tokens) when the file is the model's own.
constexpr const char* kModelTokenFields[] = {"bos_token_id", "eos_token_id"};

template <size_t N>
bool OneOf(const std::string& field, const char* const (&fields)[N]) {
  return std::find(std::begin(fields), std::end(fields), field) != std::end(fields);
}

[[noreturn]] void BadFile(const std::string& source, const std::string& problem) {
  throw std::invalid_argument(source + ": " + problem +
                              " (fix the file, or start with --generation-config vllm to ignore it)");
}

json ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot open (--generation-config)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return ParseJsonWithDepthLimit(text.str());
  } catch (const std::invalid_argument& e) {
    BadFile(path, e.what());
  }
}

}  // namespace

bool SamplingDefaults::empty() const {
  return !temperature && !top_p && !top_k && !min_p && !repetition_penalty && !max_tokens;
}

SamplingParams SamplingDefaults::ApplyTo(SamplingParams params) const {
  if (temperature) params.temperature = *temperature;
  if (top_p) params.top_p = *top_p;
  if (top_k) params.top_k = *top_k;
  if (min_p) params.min_p = *min_p;
  if (repetition_penalty) params.repetition_penalty = *repetition_penalty;
  return params;
}

json SamplingDefaults::ToJson() const {
  json out = json::object();
  if (repetition_penalty) out["repetition_penalty"] = *repetition_penalty;
  if (temperature) out["temperature"] = *temperature;
  if (top_k) out["top_k"] = *top_k;
  if (top_p) out["top_p"] = *top_p;
  if (min_p) out["min_p"] = *min_p;
  if (max_tokens) out["max_tokens"] = *max_tokens;
  return out;
}

SamplingDefaults SamplingDefaultsFromJson(const json& file, const std::string& source, bool is_model_file) {
  if (!file.is_object()) BadFile(source, std::string("must be a JSON object, got ") + file.type_name());
  SamplingDefaults d;
  d.source = source;
  json sampling = json::object();
  for (const auto& [field, value] : file.items()) {
    if (field == "max_new_tokens" || value.is_null()) continue;
    if (OneOf(field, kAppliedFields)) {
      sampling[field] = value;
    } else if (!OneOf(field, kMetadataFields) && !(is_model_file && OneOf(field, kModelTokenFields)) &&
               !(field == "do_sample" && value == true)) {
      d.ignored_fields.push_back(field);  // do_sample false (HF's greedy) included
    }
  }
  SamplingParams params;
  try {
    params = SamplingParamsFromJson(sampling, SamplingParams{});
    params.Validate(INT32_MAX);
  } catch (const std::invalid_argument& e) {
    BadFile(source, e.what());
  }
  if (sampling.contains("temperature")) d.temperature = params.temperature;
  if (sampling.contains("top_p")) d.top_p = params.top_p;
  if (sampling.contains("top_k")) d.top_k = params.top_k;
  if (sampling.contains("min_p")) d.min_p = params.min_p;
  if (sampling.contains("repetition_penalty")) d.repetition_penalty = params.repetition_penalty;
  if (JsonFieldPresent(file, "max_new_tokens")) {
    const json& value = file.at("max_new_tokens");
    if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
        (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) {
      BadFile(source, WrongTypeMessage("max_new_tokens", "an integer >= 1", value));
    }
    d.max_tokens = value.get<int64_t>();
  }
  return d;
}

SamplingDefaults LoadSamplingDefaults(const std::string& generation_config, const std::string& model) {
  if (generation_config == "vllm") return {};
  if (generation_config == "auto") {
    // A .gguf file carries no generation config; an HF folder may.
    if (!fs::is_directory(model)) return {};
    const fs::path path = fs::path(model) / "generation_config.json";
    if (!fs::exists(path)) return {};
    return SamplingDefaultsFromJson(ReadFile(path.string()), path.string(), true);
  }
  if (!fs::is_directory(generation_config)) {
    throw std::invalid_argument("--generation-config " + generation_config +
                                ": not a folder; give auto, vllm or a folder holding generation_config.json");
  }
  const fs::path path = fs::path(generation_config) / "generation_config.json";
  if (!fs::exists(path)) {
    throw std::invalid_argument("--generation-config " + generation_config + ": no generation_config.json in this folder");
  }
  std::error_code ignored;
  const bool is_model_file = fs::equivalent(generation_config, model, ignored);
  return SamplingDefaultsFromJson(ReadFile(path.string()), path.string(), is_model_file);
}

std::string SamplingDefaultsLogLine(const SamplingDefaults& defaults) {
  if (defaults.empty()) return "";
  return "Default sampling parameters have been overridden by the model's Hugging Face generation config "
         "recommended from the model creator: " +
         defaults.ToJson().dump() + " (from " + defaults.source +
         "). If this is not intended, start with `--generation-config vllm`.";
}

std::string IgnoredFieldsLogLine(const SamplingDefaults& defaults) {
  if (defaults.ignored_fields.empty()) return "";
  std::string fields;
  for (const std::string& field : defaults.ignored_fields) fields += (fields.empty() ? "" : ", ") + field;
  return "warning: " + defaults.source + ": " + fields +
         (defaults.ignored_fields.size() == 1 ? " is" : " are") +
         " not applied by vllm-cpp (it takes temperature, top_p, top_k, min_p, repetition_penalty and "
         "max_new_tokens from this file)";
}

}  // namespace vllm

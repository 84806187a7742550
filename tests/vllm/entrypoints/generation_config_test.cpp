// --generation-config: which generation_config.json is read (auto, vllm, a folder),
// its sampling fields, the startup lines, and errors that name the file and the field.
// Requests taking the defaults: api_server_generation_config_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "vllm/entrypoints/engine_args.h"
#include "vllm/entrypoints/generation_config.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr char kQwenStyle[] = R"({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": true,
  "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1,
  "max_new_tokens": 128, "transformers_version": "4.51.0"})";

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The error LoadSamplingDefaults throws, "" when it does not.
std::string LoadError(const std::string& generation_config, const std::string& model) {
  try {
    LoadSamplingDefaults(generation_config, model);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(GenerationConfigTest, AutoReadsTheModelFoldersFile) {
  TempDir model;
  Write(model.File("generation_config.json"), kQwenStyle);
  const SamplingDefaults d = LoadSamplingDefaults("auto", model.path());
  EXPECT_EQ(d.source, model.File("generation_config.json"));
  EXPECT_EQ(d.temperature, 0.6);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.95);
  EXPECT_EQ(d.min_p, 0.05);
  EXPECT_EQ(d.repetition_penalty, 1.1);
  EXPECT_EQ(d.max_tokens, 128);
  // bos/eos are the model config's; do_sample true and the version are no sampling field.
  EXPECT_TRUE(d.ignored_fields.empty());
}

TEST(GenerationConfigTest, AutoWithoutAFileOrForAGgufFileHasNoDefaults) {
  TempDir model;
  EXPECT_TRUE(LoadSamplingDefaults("auto", model.path()).empty());
  Write(model.File("model.gguf"), "GGUF");
  Write(model.File("generation_config.json"), kQwenStyle);
  EXPECT_TRUE(LoadSamplingDefaults("auto", model.File("model.gguf")).empty());
}

TEST(GenerationConfigTest, VllmIgnoresTheModelsFile) {
  TempDir model;
  Write(model.File("generation_config.json"), kQwenStyle);
  const SamplingDefaults d = LoadSamplingDefaults("vllm", model.path());
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.source, "");
  EXPECT_EQ(SamplingDefaultsLogLine(d), "");
}

TEST(GenerationConfigTest, AFolderIsReadForAnyModel) {
  TempDir config;
  Write(config.File("generation_config.json"), R"({"temperature": 0.3, "eos_token_id": 7})");
  TempDir gguf_folder;
  Write(gguf_folder.File("model.gguf"), "GGUF");
  const SamplingDefaults d = LoadSamplingDefaults(config.path(), gguf_folder.File("model.gguf"));
  EXPECT_EQ(d.temperature, 0.3);
  EXPECT_FALSE(d.top_p);
  // Outside the model folder nothing reads the token ids: they are named.
  EXPECT_EQ(d.ignored_fields, std::vector<std::string>{"eos_token_id"});
}

TEST(GenerationConfigTest, AFolderWithoutTheFileOrNoFolderIsAnError) {
  TempDir config;
  EXPECT_EQ(LoadError(config.path(), "m"),
            "--generation-config " + config.path() + ": no generation_config.json in this folder");
  EXPECT_EQ(LoadError(config.File("missing"), "m"),
            "--generation-config " + config.File("missing") +
                ": not a folder; give auto, vllm or a folder holding generation_config.json");
}

TEST(GenerationConfigTest, BadFilesAreErrorsNamingTheFileAndTheField) {
  TempDir model;
  const std::string path = model.File("generation_config.json");
  const std::string fix = " (fix the file, or start with --generation-config vllm to ignore it)";
  Write(path, R"({"temperature": "hot"})");
  EXPECT_EQ(LoadError("auto", model.path()), path + ": 'temperature' must be a number, got \"hot\"" + fix);
  Write(path, R"({"top_p": 1.5})");
  EXPECT_EQ(LoadError("auto", model.path()), path + ": top_p must be in (0, 1], got 1.500000" + fix);
  Write(path, R"({"top_k": 2.5})");
  EXPECT_EQ(LoadError("auto", model.path()), path + ": 'top_k' must be an integer, got 2.5" + fix);
  Write(path, R"({"max_new_tokens": 0})");
  EXPECT_EQ(LoadError("auto", model.path()), path + ": 'max_new_tokens' must be an integer >= 1, got 0" + fix);
  Write(path, R"({"temperature": 1e999})");
  EXPECT_NE(LoadError("auto", model.path()).find(path + ": 'temperature' is a number out of range"),
            std::string::npos);
  Write(path, R"({"temperature": 0.5,)");
  EXPECT_EQ(LoadError("auto", model.path()).rfind(path + ": not valid JSON", 0), 0u);
  Write(path, "[1]");
  EXPECT_EQ(LoadError("auto", model.path()), path + ": must be a JSON object, got array" + fix);
}

TEST(GenerationConfigTest, UnsupportedGenerationFieldsAreNamed) {
  const SamplingDefaults d = SamplingDefaultsFromJson(
      json::parse(R"({"do_sample": false, "typical_p": 0.9, "num_beams": 4, "pad_token_id": 0, "top_p": 0.9})"),
      "/m/generation_config.json");
  EXPECT_EQ(d.ignored_fields, (std::vector<std::string>{"do_sample", "num_beams", "typical_p"}));
  EXPECT_EQ(IgnoredFieldsLogLine(d),
            "warning: /m/generation_config.json: do_sample, num_beams, typical_p are not applied by vllm-cpp (it "
            "takes temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens from this file)");
  EXPECT_EQ(IgnoredFieldsLogLine(SamplingDefaultsFromJson(json::parse(R"({"top_p": 0.9})"), "f")), "");
}

TEST(GenerationConfigTest, TheStartupLineSaysWhichDefaultsApply) {
  const SamplingDefaults d = SamplingDefaultsFromJson(
      json::parse(R"({"temperature": 0.6, "top_k": 20, "max_new_tokens": 64})"), "/m/generation_config.json");
  EXPECT_EQ(SamplingDefaultsLogLine(d),
            "Default sampling parameters have been overridden by the model's Hugging Face generation config "
            "recommended from the model creator: {\"max_tokens\":64,\"temperature\":0.6,\"top_k\":20} (from "
            "/m/generation_config.json). If this is not intended, start with `--generation-config vllm`.");
}

TEST(GenerationConfigTest, TheFlagLogsOnceAndReturnsTheDefaults) {
  TempDir model;
  Write(model.File("generation_config.json"), R"({"temperature": 0.25, "typical_p": 0.5})");
  CliArgs cli("serve");
  AddGenerationConfigArg(cli);
  cli.Parse({});
  std::vector<std::string> lines;
  const SamplingDefaults d =
      SamplingDefaultsFromArgs(cli, model.path(), [&](const std::string& line) { lines.push_back(line); });
  EXPECT_EQ(d.temperature, 0.25);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("{\"temperature\":0.25}"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("typical_p is not applied"), std::string::npos) << lines[1];

  CliArgs vllm_cli("serve");
  AddGenerationConfigArg(vllm_cli);
  vllm_cli.Parse({"--generation-config", "vllm"});
  lines.clear();
  EXPECT_TRUE(SamplingDefaultsFromArgs(vllm_cli, model.path(), [&](const std::string& l) { lines.push_back(l); })
                  .empty());
  EXPECT_TRUE(lines.empty());
}

}  // namespace
}  // namespace vllm

// `vllm-cpp info PATH`: what a model file or folder holds, without running it:
// format, architecture, the ModelConfig, the stored tensors (count, count per dtype,
// bytes), and whether every weight loads.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/model_loader/embedded_files.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vt/error.h"

namespace vllm {
namespace {

struct StoredTensors {
  std::string format;
  int64_t count = 0;
  uint64_t bytes = 0;
  std::map<std::string, int64_t> per_dtype;  // file's dtype name -> tensors
};

StoredTensors ReadGgufTensors(const GgufFile& file) {
  StoredTensors s;
  s.format = "GGUF v" + std::to_string(file.version()) + ", alignment " + std::to_string(file.alignment()) + ", " +
             std::to_string(file.metadata().size()) + " metadata keys";
  for (const GgufTensorInfo& t : file.tensors()) {
    ++s.count;
    s.bytes += t.nbytes;
    ++s.per_dtype[t.Type().name];
  }
  return s;
}

StoredTensors ReadHfTensors(const std::string& folder) {
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::Open(folder);
  StoredTensors s;
  s.format = "HF checkpoint folder, " + std::to_string(ckpt.files().size()) + " safetensors file(s)";
  for (const std::string& name : ckpt.names()) {
    const SafetensorsTensorInfo& t = ckpt.Info(name);
    ++s.count;
    s.bytes += t.end - t.begin;
    ++s.per_dtype[t.dtype_name];
  }
  return s;
}

void PrintStored(const StoredTensors& s) {
  std::printf("tensors: %lld stored, %llu bytes (%.2f MiB)\n", static_cast<long long>(s.count),
              static_cast<unsigned long long>(s.bytes), static_cast<double>(s.bytes) / (1 << 20));
  std::printf("dtypes:");
  const char* separator = " ";
  for (const auto& [dtype, n] : s.per_dtype) {
    std::printf("%s%s %lld", separator, dtype.c_str(), static_cast<long long>(n));
    separator = ", ";
  }
  std::printf("\n");
}

void PrintMetadata(const GgufMetadata& metadata) {
  std::printf("metadata:\n");
  for (const auto& [key, value] : metadata.entries()) std::printf("  %s = %s\n", key.c_str(), value.ToString().c_str());
}

}  // namespace

int RunInfoCommand(const CommandArgs& args) {
  CliArgs cli("info");
  cli.AddPositional("PATH", "an HF checkpoint folder or a .gguf file", true);
  cli.AddOption("gdn-value-head-order", "GGUF GDN value-head order: auto, tiled or grouped", "auto");
  cli.AddFlag("metadata", "also list every GGUF metadata key and value");
  cli.AddFlag("help", "show this help");
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::printf("%s", cli.Help().c_str());
    return 0;
  }
  cli.Parse(args);
  const std::string path = cli.GetString("PATH");
  const LoadOptions options{.gdn_value_head_order = ParseGdnValueHeadOrder(cli.GetString("gdn-value-head-order")),
                            .on_warning = [](const std::string&) {}};
  std::printf("path: %s\n", path.c_str());
  const bool embedded = IsEmbeddedFile(path);
  if (!embedded && !std::filesystem::exists(path)) throw vt::Error(path + ": no such file or folder");
  const bool is_folder = !embedded && std::filesystem::is_directory(path);
  std::optional<GgufFile> gguf;
  if (!is_folder) gguf = GgufFile::Open(path);
  const StoredTensors stored = is_folder ? ReadHfTensors(path) : ReadGgufTensors(*gguf);
  std::printf("format: %s\n", stored.format.c_str());
  if (gguf && cli.GetFlag("metadata")) PrintMetadata(gguf->metadata());
  PrintStored(stored);
  const LoadedModel model = LoadModel(path, options);
  std::printf("architecture: %s\nconfig:\n%s", model.config.architecture.c_str(),
              DescribeModelConfig(model.config).c_str());
  std::printf("weights: %zu loaded (canonical names)\n", model.weights.size());
  for (const std::string& warning : model.warnings) std::printf("warning: %s\n", warning.c_str());
  return 0;
}

}  // namespace vllm

// `vllm-cpp convert HF_FOLDER OUT.gguf [--outtype TYPE]`: an HF checkpoint folder
// as a GGUF file that llama.cpp loads too (what convert_hf_to_gguf.py does for
// llama.cpp users); see vllm/model_loader/hf_to_gguf.h for the transforms.
#include <cstdio>
#include <filesystem>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/model_loader/hf_to_gguf.h"

namespace vllm {

int RunConvertCommand(const CommandArgs& args) {
  CliArgs cli("convert");
  cli.AddPositional("HF_FOLDER", "the checkpoint folder (config.json, safetensors, tokenizer)", true);
  cli.AddPositional("OUT", "the GGUF file to write", true);
  cli.AddOption("outtype",
                "type of the weight matrices: auto (the checkpoint's float type), f32, f16, bf16, q8_0, q4_0, "
                "q4_k, q5_k or q6_k; norms, ssm_a/ssm_dt, conv1d and routers stay f32",
                "auto");
  cli.AddFlag("tokenizer", "copy tokenizer.json / tokenizer_config.json into tokenizer.ggml.* keys", true);
  cli.AddFlag("mtp", "copy the MTP module (mtp.*) as block L's nextn tensors when the checkpoint has one", true);
  cli.AddFlag("help", "show this help");
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::printf("%s", cli.Help().c_str());
    return 0;
  }
  cli.Parse(args);
  const std::string out = cli.GetString("OUT");
  const ConvertOptions options{.outtype = ParseGgufOutType(cli.GetString("outtype")),
                               .copy_tokenizer = cli.GetFlag("tokenizer"),
                               .copy_mtp = cli.GetFlag("mtp")};
  const GgufWriter plan = PlanHfToGguf(cli.GetString("HF_FOLDER"), options);
  plan.Write(out);
  std::printf("wrote %s: %zu tensors, %zu metadata keys, %llu bytes\n", out.c_str(), plan.tensors().size(),
              plan.metadata().size(), static_cast<unsigned long long>(std::filesystem::file_size(out)));
  return 0;
}

}  // namespace vllm

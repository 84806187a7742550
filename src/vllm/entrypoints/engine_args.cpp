#include "vllm/entrypoints/engine_args.h"

#include "vllm/model_loader/embedded_files.h"

namespace vllm {

void AddEngineArgs(CliArgs& cli) {
  cli.AddOption("tokenizer", "tokenizer folder or .gguf (default: the model)", "");
  cli.AddOption("device", "cpu, cuda[:N] or rocm[:N]", "cpu");
  cli.AddOption("dtype", "activation dtype: auto, float32, bfloat16, float16", "auto");
  cli.AddOption("max-num-seqs", "most requests running at once", "256");
  cli.AddOption("max-num-batched-tokens", "token budget of one engine step", "2048");
  cli.AddOption("max-model-len",
                "longest prompt + output, also as a size: 32k = 32000, 32K = 32768 (default: the model's, capped by "
                "the KV cache)",
                "0");
  cli.AddOption("block-size", "tokens per KV cache block", "16");
  cli.AddOption("num-gpu-blocks-override", "number of KV cache blocks, on any device (skips memory sizing)");
  cli.AddOption("gpu-memory-utilization", "share of GPU memory the engine may use", "0.9");
  cli.AddOption("kv-cache-memory", "CPU: bytes for KV pages and recurrent state (default: min(4 GiB, 40% of free RAM))",
                "0");
  cli.AddFlag("enable-prefix-caching",
              "reuse KV blocks (and, for hybrid models, recurrent-state snapshots) of shared prompt prefixes "
              "(default: on)");
  cli.AddOption("state-checkpoint-interval",
                "hybrid models: tokens between recurrent-state checkpoints, a multiple of --block-size (0 = 512 "
                "on the CPU; on a GPU --max-num-batched-tokens rounded down to a block multiple, at least 512)",
                "0");
  cli.AddOption("state-snapshot-memory",
                "hybrid models: bytes of recurrent-state snapshots for prefix caching, taken from the KV cache "
                "memory (default: an eighth of it)",
                "0");
  cli.AddFlag("enforce-eager", "GPU: run decode steps op by op instead of replaying captured device graphs");
  cli.AddOption("max-cudagraph-capture-size",
                "GPU: the largest decode batch replayed as a device graph (graphs are captured at start-up for "
                "batch sizes 1, 2, 4, ... up to it; larger batches run op by op) (default: 512)");
  cli.AddOption("speculative-config",
                "speculative decoding with the model's MTP module, as JSON: {\"method\": \"mtp\", "
                "\"num_speculative_tokens\": K, \"disable_by_batch_size\": N (0 = never)}; without "
                "disable_by_batch_size, drafting runs at the batch sizes where it measures faster (default: off)");
  cli.AddOption("seed", "seed of the generator used by requests without a seed", "0");
  cli.AddOption("threads",
                "CPU threads: the model's on the CPU, structured outputs' token masks on any device (0 = all cores; "
                "on a GPU all but two, left to the thread that queues the forward and the masks' precompute)",
                "0");
  cli.AddOption("tensor-parallel-size",
                "ranks the model is split over (CPU: worker processes on this host, Gloo collectives; --threads "
                "is then per rank)",
                "1");
  cli.AddFlag("enable-expert-parallel",
              "MoE models with --tensor-parallel-size N: each rank holds 1/N of the experts, whole, instead of "
              "1/N of every expert's width");
  cli.AddOption("gdn-value-head-order", "GGUF value-head order of Gated DeltaNet layers: auto, tiled, grouped", "auto");
}

std::string ModelOrDemoModel(const CliArgs& cli, const std::string& command, const std::string& option) {
  if (cli.WasGiven(option)) return cli.GetString(option);
  if (IsEmbeddedFile(kDemoModelName)) return kDemoModelName;
  throw CliError(command + ": give the model (an HF folder or a .gguf file); this build has no embedded demo model");
}

EngineConfig EngineConfigFromArgs(const CliArgs& cli, const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.tokenizer = cli.GetString("tokenizer");
  c.device = vt::ParseDevice(cli.GetString("device"));
  c.dtype = cli.GetString("dtype");
  c.max_num_seqs = cli.GetInt("max-num-seqs");
  c.max_num_batched_tokens = cli.GetInt("max-num-batched-tokens");
  c.max_model_len = cli.GetHumanInt("max-model-len");
  c.block_size = cli.GetInt("block-size");
  if (cli.WasGiven("num-gpu-blocks-override")) c.num_gpu_blocks_override = cli.GetInt("num-gpu-blocks-override");
  c.gpu_memory_utilization = cli.GetDouble("gpu-memory-utilization");
  c.cpu_kv_cache_bytes = cli.GetInt("kv-cache-memory");
  if (cli.WasGiven("enable-prefix-caching")) c.enable_prefix_caching = cli.GetFlag("enable-prefix-caching");
  c.state_checkpoint_interval = cli.GetInt("state-checkpoint-interval");
  c.state_snapshot_memory = cli.GetInt("state-snapshot-memory");
  c.enforce_eager = cli.GetFlag("enforce-eager");
  if (cli.WasGiven("max-cudagraph-capture-size")) c.max_cudagraph_capture_size = cli.GetInt("max-cudagraph-capture-size");
  if (cli.WasGiven("speculative-config")) {
    try {
      c.speculative_config = ParseSpeculativeConfig(cli.GetString("speculative-config"));
    } catch (const std::invalid_argument& e) {
      throw CliError(e.what());
    }
  }
  c.seed = static_cast<uint64_t>(cli.GetInt("seed"));
  c.num_threads = static_cast<int>(cli.GetInt("threads"));
  c.tensor_parallel_size = cli.GetInt("tensor-parallel-size");
  c.enable_expert_parallel = cli.GetFlag("enable-expert-parallel");
  c.load_options.gdn_value_head_order = ParseGdnValueHeadOrder(cli.GetString("gdn-value-head-order"));
  if (c.max_num_seqs < 1 || c.max_num_batched_tokens < 1) {
    throw CliError("--max-num-seqs and --max-num-batched-tokens must be >= 1");
  }
  if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1)) {
    throw CliError("--gpu-memory-utilization must be in (0, 1]");
  }
  return c;
}

void AddGenerationConfigArg(CliArgs& cli) {
  cli.AddOption("generation-config",
                "default sampling fields of requests: auto (the model folder's generation_config.json), vllm (the "
                "engine's defaults) or a FOLDER holding generation_config.json",
                "auto");
}

SamplingDefaults SamplingDefaultsFromArgs(const CliArgs& cli, const std::string& model,
                                          const std::function<void(const std::string&)>& log) {
  SamplingDefaults defaults = LoadSamplingDefaults(cli.GetString("generation-config"), model);
  if (const std::string line = SamplingDefaultsLogLine(defaults); !line.empty()) log(line);
  if (const std::string line = IgnoredFieldsLogLine(defaults); !line.empty()) log(line);
  return defaults;
}

// The defaults shown are SamplingParams' own, which SamplingParamsFromArgs starts from.
void AddSamplingArgs(CliArgs& cli, const std::string& max_tokens) {
  cli.AddOption("max-tokens", "tokens to generate at most (per request)", max_tokens);
  cli.AddOption("temperature", "0 = greedy", "1.0");
  cli.AddOption("top-k", "keep the k most likely tokens (0 or -1 = all)", "0");
  cli.AddOption("top-p", "nucleus sampling mass", "1.0");
  cli.AddOption("min-p", "drop tokens below min-p times the top probability", "0.0");
}

SamplingParams SamplingParamsFromArgs(const CliArgs& cli, const SamplingDefaults& defaults) {
  SamplingParams p = defaults.ApplyTo({});
  p.max_tokens = cli.WasGiven("max-tokens") || !defaults.max_tokens ? cli.GetInt("max-tokens") : *defaults.max_tokens;
  if (cli.WasGiven("temperature")) p.temperature = cli.GetDouble("temperature");
  if (cli.WasGiven("top-k")) p.top_k = static_cast<int>(cli.GetInt("top-k"));
  if (cli.WasGiven("top-p")) p.top_p = cli.GetDouble("top-p");
  if (cli.WasGiven("min-p")) p.min_p = cli.GetDouble("min-p");
  if (cli.WasGiven("seed")) p.seed = static_cast<uint64_t>(cli.GetInt("seed"));
  return p;
}

}  // namespace vllm
